"""What the framework adapters share: a search of one collection, a fixed filter ANDed with each call's.

A retriever built with ``filter={"workspace_id": 7}`` searches inside workspace 7 whatever a call adds:
the call's filter narrows it, never widens it, and a collection's ``required_filter`` is checked on the
whole (``store.vectors.tenancy``). Search options the adapters do not name themselves (``min_score``, and
whatever ``Client.search`` takes later) pass through to ``Client.search`` unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from store.client import Client
from store.process.defaults import default_client
from store.retrieval.matches import Matches
from store.retrieval.search import as_filter
from store.vectors.filters import Filter
from store.vectors.records import VectorMatch

__all__ = ["FilterLike", "Scope", "asearch", "merged", "search"]

#: A Filter, or its JSON form (``Filter.from_dict``).
FilterLike = Filter | Mapping[str, Any]


def merged(fixed: FilterLike | None, call: FilterLike | None) -> Filter | None:
    """``fixed`` AND ``call``; either may be None."""
    first, second = as_filter(fixed), as_filter(call)
    if first is None or second is None:
        return first if second is None else second
    return first & second


class Scope(Protocol):
    """What an adapter is built over: a ``collection`` searched through ``client`` (None: the default client)
    inside its fixed ``filter``."""

    @property
    def client(self) -> Client | None: ...

    @property
    def collection(self) -> str: ...

    @property
    def filter(self) -> FilterLike | None: ...


def search(
    scope: Scope,
    query: str | Sequence[float],
    *,
    filter: FilterLike | None = None,
    limit: int,
    options: Mapping[str, Any] | None = None,
) -> Matches:
    """``Client.search`` of the scope's collection under its filter AND ``filter``. Raises ConfigError (a bad
    filter or option, a required filter not pinned), StoreUnavailable, EmbeddingError."""
    return (scope.client or default_client()).search(
        scope.collection, query, filter=merged(scope.filter, filter), limit=limit, **dict(options or {})
    )


async def asearch(
    scope: Scope,
    query: str | Sequence[float],
    *,
    filter: FilterLike | None = None,
    limit: int,
    options: Mapping[str, Any] | None = None,
) -> list[VectorMatch]:
    """``search`` without blocking the event loop (``Client.asearch``, in a worker thread)."""
    return await (scope.client or default_client()).asearch(
        scope.collection, query, filter=merged(scope.filter, filter), limit=limit, **dict(options or {})
    )
