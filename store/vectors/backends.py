"""Which backend a store is: the factory that builds the ``[vectors]`` store, above the seam and its backends.

It lives apart from the seam (``store.vectors.base``) so that the backends import the seam and this
module imports the backends, never the other way round. Drivers load only when their store is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.errors import ConfigError
from store.settings import Settings
from store.vectors.base import DEFAULT_METRIC, Metric, QueryEmbedder, VectorStore

if TYPE_CHECKING:
    from store.vectors.pgvector.building import BuildWatch

__all__ = ["build_watch", "memory_store", "open_store"]


def memory_store(
    *, dimensions: int, metric: Metric = DEFAULT_METRIC, embedder: QueryEmbedder | None = None
) -> VectorStore:
    """An in-process store with exact search: for tests and one-process use."""
    from store.vectors.memory import MemoryStore

    return MemoryStore(dimensions=dimensions, metric=metric, embedder=embedder)


def open_store(settings: Settings, *, embedder: QueryEmbedder | None = None) -> VectorStore:
    """The store ``[vectors]`` names, with ``[limits]`` and what ``[collections]`` declares (indexed fields, search
    settings, and the rules each collection must hold: ``VectorStore.declare``). Raises ConfigError,
    StoreUnavailable."""
    store = _backend(settings, embedder)
    store.limits = settings.limits
    for name, declared in settings.collections.items():
        store.declare(name, declared)
    return store


def _backend(settings: Settings, embedder: QueryEmbedder | None) -> VectorStore:
    vectors = settings.vectors
    if vectors.store == "memory":
        return memory_store(dimensions=vectors.dimensions, metric=vectors.metric, embedder=embedder)
    if not vectors.url:
        raise ConfigError(
            f"vectors.url is required for the {vectors.store} store "
            "(set it in vectorsync.toml or VECTORSYNC_VECTORS__URL)"
        )
    if vectors.store == "pgvector":
        from store.vectors.pgvector import PgvectorStore

        return PgvectorStore.from_settings(settings, embedder=embedder)
    from store.vectors.qdrant import QdrantStore

    return QdrantStore.from_settings(settings, embedder=embedder)


def build_watch(settings: Settings) -> BuildWatch | None:
    """What reads the index builds under way of the ``[vectors]`` store, or None: only pgvector defers and
    builds its indexes (``store.vectors.pgvector.building``). Raises ConfigError."""
    vectors = settings.vectors
    if vectors.store != "pgvector" or not vectors.url:
        return None
    from store.connect.postgres import make_engine
    from store.vectors.pgvector.building import BuildWatch

    engine = make_engine(vectors.url, setting="vectors.url", network=settings.network, pool_size=1)
    return BuildWatch(engine, vectors.table_prefix)
