"""Every sync/async pair of store.query says which call was meant when the two are mixed up."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from typing import Any

import pytest

import store.query as query
from store import VectorRecord
from store.embeddings import Embeddings
from store.retrieval import Retrieval
from store.settings import Settings
from store.vectors.backends import memory_store

SETTINGS = Settings.model_validate(
    {"vectors": {"store": "memory", "dimensions": 16}, "embeddings": {"cache_ttl_days": 0}}
)
STORE = memory_store(dimensions=16, embedder=Embeddings.from_settings(SETTINGS))
STORE.get_collection("notes", create=True).upsert_many(
    [
        VectorRecord("a:0", [1.0] + [0.0] * 15, "Dana moved the onboarding call", {"record_id": "a"}),
        VectorRecord("b:0", [0.0, 1.0] + [0.0] * 14, "The invoice was paid", {"record_id": "b"}),
    ]
)
RETRIEVAL = Retrieval.from_settings(SETTINGS, store=STORE)
MATCHES = query.search("notes", [1.0] + [0.0] * 15, store=STORE)

#: Each pair with the arguments that make a call of it.
PAIRS: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
    "search": (
        lambda: query.search("notes", "onboarding call", store=STORE),
        lambda: query.asearch("notes", "onboarding call", store=STORE),
    ),
    "rerank": (
        lambda: query.rerank("onboarding", MATCHES, retrieval=RETRIEVAL),
        lambda: query.arerank("onboarding", MATCHES, retrieval=RETRIEVAL),
    ),
    "answer": (
        lambda: query.answer("notes", "When is the onboarding call?", retrieval=RETRIEVAL),
        lambda: query.aanswer("notes", "When is the onboarding call?", retrieval=RETRIEVAL),
    ),
}


def test_every_async_twin_of_the_query_module_is_tested() -> None:
    twins = {name[1:] for name in query.__all__ if name.startswith("a") and name[1:] in query.__all__}
    assert twins == set(PAIRS)


@pytest.mark.parametrize("name", PAIRS)
def test_awaiting_the_sync_function_names_its_async_twin(name: str) -> None:
    sync, _ = PAIRS[name]

    async def misuse() -> None:
        await sync()

    with pytest.raises(TypeError, match=rf"^{name}\(\) is synchronous: use `await a{name}\(\.\.\.\)`"):
        asyncio.run(misuse())


@pytest.mark.parametrize("name", PAIRS)
def test_the_async_twin_used_without_await_names_await(name: str) -> None:
    _, twin = PAIRS[name]
    expected = rf"a{name}\(\) is a coroutine function: use `await a{name}\(\.\.\.\)`"

    async def misuse() -> None:
        pending = twin()
        for use in (len, iter, bool, lambda p: p[0], lambda p: p.answered, lambda p: "x" in p):
            with pytest.raises(TypeError, match=expected):
                use(pending)
        await pending  # still a coroutine, awaitable once the mistake is fixed

    asyncio.run(misuse())


@pytest.mark.parametrize("name", PAIRS)
def test_both_give_the_same_result_used_as_meant(name: str) -> None:
    sync, twin = PAIRS[name]

    async def together() -> list[Any]:
        return [await twin(), await asyncio.create_task(twin()), *await asyncio.gather(twin())]

    done = [sync(), asyncio.run(twin()), *asyncio.run(together())]
    assert all(result == done[0] for result in done)


def test_an_async_twin_never_awaited_warns_naming_the_fix() -> None:
    pending = query.asearch("notes", "onboarding", store=STORE)
    with pytest.warns(RuntimeWarning, match=r"asearch\(\.\.\.\) was never awaited: .*`await asearch\(\.\.\.\)`"):
        del pending
        gc.collect()


def test_results_stay_what_they_were() -> None:
    matches = query.search("notes", "onboarding call", store=STORE)
    assert isinstance(matches, list) and matches[0].id == "a:0" and matches == list(matches)
    assert query.answer("notes", "When is the onboarding call?", retrieval=RETRIEVAL).answered
