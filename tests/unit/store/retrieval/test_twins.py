"""store/retrieval/twins.py: the messages that name the right call, and Pending, an async twin's coroutine that
refuses to be used as its result, warns when never awaited, and stays a coroutine (the query functions' pairs:
tests/unit/store/test_query.py)."""

from __future__ import annotations

import asyncio
import gc
import warnings

import pytest

from store.retrieval.twins import Pending, async_misuse, sync_misuse


async def _three() -> int:
    return 3


def test_each_message_names_the_call_that_was_meant() -> None:
    assert sync_misuse("search").startswith("search() is synchronous: use `await asearch(...)` in async code")
    assert async_misuse("asearch").startswith("asearch() is a coroutine function: use `await asearch(...)`")
    assert async_misuse("asearch").endswith("or call search(...) in synchronous code")


def test_pending_awaits_as_its_coroutine_and_is_driven_by_tasks() -> None:
    assert asyncio.run(Pending(_three(), "athree")) == 3

    async def driven() -> list[int]:
        return [await asyncio.create_task(Pending(_three(), "athree")), *await asyncio.gather(Pending(_three(), "a"))]

    assert asyncio.run(driven()) == [3, 3]


def test_pending_used_as_its_result_names_await() -> None:
    pending = Pending(_three(), "athree")
    for use in (len, iter, bool, lambda p: p[0], lambda p: 1 in p, lambda p: p.value):
        with pytest.raises(TypeError, match=r"^athree\(\) is a coroutine function: use `await athree\(\.\.\.\)`"):
            use(pending)
    assert repr(pending) == "<coroutine athree(...): await it>" and pending.__name__ == "athree"
    assert asyncio.run(pending) == 3  # the mistake fixed, it still runs


def test_pending_never_awaited_warns_naming_the_fix_and_one_awaited_does_not() -> None:
    pending = Pending(_three(), "athree")
    with pytest.warns(RuntimeWarning, match=r"^athree\(\.\.\.\) was never awaited: .*`await athree\(\.\.\.\)`"):
        del pending
        gc.collect()
    awaited = Pending(_three(), "athree")
    asyncio.run(awaited)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del awaited
        gc.collect()
    assert [w for w in caught if issubclass(w.category, RuntimeWarning)] == []
