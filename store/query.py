"""Search from app code and the CLI: the store and embeddings come from the settings.

    from store.query import search
    search("activity_notes", "onboarding delays", filter={"kind": "call"}, limit=5)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from store.settings import Settings, load_settings
from store.vectors.collection import DEFAULT_LIMIT, VectorStore
from store.vectors.filters import Filter
from store.vectors.records import VectorMatch

__all__ = ["asearch", "default_store", "search", "store_from_settings"]

_default: VectorStore | None = None
_lock = threading.Lock()


def store_from_settings(settings: Settings) -> VectorStore:
    """The configured store, with the embeddings chain for text queries."""
    return VectorStore.from_settings(settings, embedder=_embedder(settings))


def _embedder(settings: Settings) -> Any:
    from store.embeddings import Embeddings

    return Embeddings.from_settings(settings)


def default_store() -> VectorStore:
    """One store per process, built from ``load_settings()`` on first use."""
    global _default
    with _lock:
        if _default is None:
            _default = store_from_settings(load_settings())
        return _default


def _as_filter(filter: Filter | Mapping[str, Any] | None) -> Filter | None:
    return Filter.from_dict(filter) if isinstance(filter, Mapping) else filter


def search(
    collection: str,
    query: str | Sequence[float],
    *,
    filter: Filter | Mapping[str, Any] | None = None,
    limit: int = DEFAULT_LIMIT,
    min_score: float | None = None,
    store: VectorStore | None = None,
) -> list[VectorMatch]:
    """The ``limit`` best matches for a text or vector ``query`` in ``collection``.

    ``filter`` is a Filter or its JSON form. Raises ConfigError, StoreUnavailable, EmbeddingError.
    """
    target = (store or default_store()).collection(collection)
    return target.search(query, filter=_as_filter(filter), limit=limit, min_score=min_score)


async def asearch(
    collection: str,
    query: str | Sequence[float],
    *,
    filter: Filter | Mapping[str, Any] | None = None,
    limit: int = DEFAULT_LIMIT,
    min_score: float | None = None,
    store: VectorStore | None = None,
) -> list[VectorMatch]:
    """``search`` without blocking the event loop (it runs in a worker thread)."""
    return await asyncio.to_thread(
        search, collection, query, filter=filter, limit=limit, min_score=min_score, store=store
    )
