"""What a worker process holds: settings, the store, embeddings, the ledger and one Indexer per collection.

Built on first use inside each process (after the prefork fork), so no
connection is shared between processes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from store.coalesce import Coalescer
from store.embeddings import Embeddings
from store.errors import ConfigError
from store.ledger import Ledger, ledger_from_settings
from store.settings import Settings, load_settings
from store.vectors.collection import VectorStore
from worker.chunking import Chunker
from worker.metrics import watch_embeddings
from worker.pipeline import Indexer
from worker.sources import source_from_settings

__all__ = ["WorkerContext", "context", "reset_context", "use_context"]


@dataclass
class WorkerContext:
    settings: Settings
    store: VectorStore
    embeddings: Embeddings
    ledger: Ledger
    coalescer: Coalescer
    _indexers: dict[str, Indexer] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_settings(cls, settings: Settings, *, ledger: Ledger | None = None) -> WorkerContext:
        """Everything the settings name; ``ledger`` replaces the state database's (an in-memory one)."""
        embeddings = Embeddings.from_settings(settings)
        watch_embeddings(embeddings.stats)
        return cls(
            settings=settings,
            store=VectorStore.from_settings(settings, embedder=embeddings),
            embeddings=embeddings,
            ledger=ledger if ledger is not None else ledger_from_settings(settings),
            coalescer=Coalescer(settings.cache_url, ttl_seconds=settings.broker.coalesce_seconds),
        )

    def indexer(self, collection: str) -> Indexer:
        """The Indexer of a configured collection. Raises ConfigError for an unknown one."""
        with self._lock:
            if collection not in self._indexers:
                self._indexers[collection] = self._build(collection)
            return self._indexers[collection]

    def _build(self, collection: str) -> Indexer:
        config = self.settings.collections.get(collection)
        if config is None:
            known = ", ".join(sorted(self.settings.collections)) or "none"
            raise ConfigError(f"collection {collection!r} is not configured (add [collections.{collection}]; "
                              f"configured: {known})")
        return Indexer(
            name=collection,
            collection=self.store.collection(collection),
            source=source_from_settings(collection, config.source),
            chunker=Chunker.from_settings(config.chunker),
            embeddings=self.embeddings,
            ledger=self.ledger,
        )

    def close(self) -> None:
        for indexer in self._indexers.values():
            indexer.source.close()
        self.store.close()
        self.embeddings.close()
        self.ledger.close()
        self.coalescer.close()


_context: WorkerContext | None = None
_context_lock = threading.Lock()


def context() -> WorkerContext:
    """This process's context, built from ``load_settings()`` on first use."""
    global _context
    with _context_lock:
        if _context is None:
            _context = WorkerContext.from_settings(load_settings())
        return _context


def reset_context() -> None:
    """Drop this process's context (after a fork, or in tests)."""
    global _context
    with _context_lock:
        _context = None


def use_context(ctx: WorkerContext | None) -> WorkerContext | None:
    """Make ``ctx`` this process's context (None: built again on next use); returns the previous one.
    For running tasks in a test process (``producer.testing``)."""
    global _context
    with _context_lock:
        previous, _context = _context, ctx
        return previous
