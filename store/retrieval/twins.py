"""Sync and async twins that say so when they are mixed up.

``await search(...)`` fails with a TypeError naming ``asearch``: the results of the synchronous functions
refuse ``await``. ``asearch(...)`` used without ``await`` fails with a TypeError naming ``await asearch(...)``
as soon as its result is used as one (iterated, indexed, measured, tested, an attribute read), and warns
when it is collected unawaited. It stays a coroutine: ``asyncio.run``, ``create_task`` and ``gather`` take it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import warnings
from collections.abc import Callable, Coroutine, Generator
from typing import Any, NoReturn, ParamSpec, TypeVar

__all__ = ["Pending", "async_misuse", "sync_misuse", "twin"]

T = TypeVar("T")
P = ParamSpec("P")


def sync_misuse(name: str) -> str:
    """What ``await name(...)`` says, for a synchronous ``name``."""
    return f"{name}() is synchronous: use `await a{name}(...)` in async code, or call {name}(...) without await"


def async_misuse(name: str) -> str:
    """What using ``name(...)``'s coroutine as its result says, for an async twin ``name``."""
    return (
        f"{name}() is a coroutine function: use `await {name}(...)` inside async code, or call "
        f"{name[1:]}(...) in synchronous code"
    )


class Pending(Coroutine[Any, Any, T]):
    """What an async twin (``asearch``, ``arerank``, ``aanswer``) returns: its coroutine, to be awaited."""

    __slots__ = ("__weakref__", "_coro", "_name", "_taken")

    def __init__(self, coro: Coroutine[Any, Any, T], name: str) -> None:
        self._coro = coro
        self._name = name
        self._taken = False  # awaited, or driven by a task: never "never awaited"

    def send(self, value: Any) -> Any:
        self._taken = True
        return self._coro.send(value)

    def throw(self, *error: Any) -> Any:
        self._taken = True
        return self._coro.throw(*error)

    def close(self) -> None:
        self._taken = True
        self._coro.close()

    def __await__(self) -> Generator[Any, None, T]:
        self._taken = True  # this wrapper may be collected before the coroutine it hands over starts
        return self._coro.__await__()

    def __getattr__(self, attribute: str) -> Any:
        if attribute in ("__name__", "__qualname__"):
            return self._name
        if attribute.startswith(("cr_", "gi_")):  # what asyncio reads of a coroutine (its repr, its state)
            return getattr(self._coro, attribute)
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        raise TypeError(f"{async_misuse(self._name)} (read .{attribute} of the coroutine)")

    def _misused(self, *_: Any) -> NoReturn:
        raise TypeError(async_misuse(self._name))

    __iter__ = __len__ = __getitem__ = __contains__ = __bool__ = _misused

    def __repr__(self) -> str:
        return f"<coroutine {self._name}(...): await it>"

    def __del__(self) -> None:
        coro = getattr(self, "_coro", None)
        if coro is not None and not getattr(self, "_taken", True):
            coro.close()  # never started: instead of Python's warning, one that names the fix
            warnings.warn(
                f"{self._name}(...) was never awaited: {async_misuse(self._name)}", RuntimeWarning, stacklevel=2
            )


def twin(function: Callable[P, T]) -> Callable[P, Pending[T]]:
    """``function``'s async twin ``a<name>``: the same call run in a worker thread, so the event loop is not blocked."""
    name = f"a{function.__name__}"

    @functools.wraps(function)
    def run(*args: P.args, **kwargs: P.kwargs) -> Pending[T]:
        return Pending(asyncio.to_thread(function, *args, **kwargs), name)

    run.__name__ = run.__qualname__ = name
    run.__doc__ = f"``{function.__name__}`` without blocking the event loop: ``await {name}(...)``."
    signature = inspect.signature(function)
    run.__signature__ = signature.replace(return_annotation=f"Pending[{signature.return_annotation}]")  # type: ignore[attr-defined]
    return run
