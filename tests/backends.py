"""Build any backend for a test: memory, pgvector (real PostgreSQL) or Qdrant (local mode or server)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from store import VectorStore
from store.vectors.backends import memory_store
from store.vectors.base import Collection, Metric
from store.vectors.rules import Declared

__all__ = [
    "BACKENDS",
    "IN_PROCESS_BACKENDS",
    "SERVER_BACKENDS",
    "StoreFactory",
    "keep_keywords",
    "make_store_factory",
    "unique_name",
]

#: Backends that run inside the test process (unit tests), and those behind a server (integration tests).
IN_PROCESS_BACKENDS = ["memory", "qdrant"]
SERVER_BACKENDS = ["pgvector", *(["qdrant_server"] if os.environ.get("VECTORSYNC_TEST_QDRANT_URL") else [])]
BACKENDS = ["memory", "pgvector", "qdrant", *SERVER_BACKENDS[1:]]
_names = itertools.count()

StoreFactory = Callable[..., VectorStore]


def unique_name(prefix: str = "c") -> str:
    """A collection name no other test in this session uses."""
    return f"{prefix}_{os.getpid()}_{next(_names)}"


def keep_keywords(store: VectorStore) -> VectorStore:
    """``store``, its collections keeping the keyword index unless configured otherwise (``search.keywords``):
    for the tests of keyword search itself."""
    ensure = store._ensure

    def keeping(name: str, declared: Declared | None) -> Collection:
        if name in store.search_settings:  # configured: as its settings say
            return ensure(name, declared)
        return ensure(name, replace(declared or Declared(), keywords=True))  # a new one is made keeping them

    store._ensure = keeping  # type: ignore[method-assign]
    return store


def make_store_factory(request: pytest.FixtureRequest, kind: str) -> Iterator[StoreFactory]:
    """Yield ``make(dimensions=, metric=) -> VectorStore``; closes every store afterwards."""
    made: list[VectorStore] = []

    def make(*, dimensions: int = 4, metric: Metric = "cosine") -> VectorStore:
        store: VectorStore
        if kind == "memory":
            store = memory_store(dimensions=dimensions, metric=metric)
        elif kind == "pgvector":
            from store.vectors.pgvector import PgvectorStore

            store = PgvectorStore(request.getfixturevalue("postgres_url"), dimensions=dimensions, metric=metric)
        elif kind == "qdrant":
            from store.vectors.qdrant import QdrantStore

            store = QdrantStore(":memory:", dimensions=dimensions, metric=metric)
        else:
            from store.vectors.qdrant import QdrantStore

            store = QdrantStore(os.environ["VECTORSYNC_TEST_QDRANT_URL"], dimensions=dimensions, metric=metric)
        made.append(store)
        return store

    yield make
    for store in made:
        for name in store.list_collections():
            if name.startswith(f"c_{os.getpid()}_"):
                store.drop_collection(name)
        store.close()
