"""The memory backend: exact search with numpy; the reference the other backends must match.

``replace_where`` holds the collection's lock, so readers see the old set or
the new set, never both or neither.
"""

from __future__ import annotations

import threading

import numpy as np

from store.vectors.base import DEFAULT_METRIC, Collection, Metric, QueryEmbedder, VectorStore
from store.vectors.filters import Filter
from store.vectors.records import VectorMatch, VectorRecord

__all__ = ["MemoryCollection", "MemoryStore", "scores"]


def scores(matrix: np.ndarray, query: np.ndarray, metric: Metric) -> np.ndarray:
    """Higher is closer: cosine similarity, dot product, or 1/(1+euclidean distance)."""
    if metric == "dot":
        return matrix @ query
    if metric == "cosine":
        norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(query)
        return (matrix @ query) / norms
    return 1.0 / (1.0 + np.linalg.norm(matrix - query, axis=1))


class MemoryCollection(Collection):
    """Records in a dict; search scans the records that match the filter."""

    def __init__(self, name: str, *, dimensions: int, metric: Metric, embedder: QueryEmbedder | None = None):
        super().__init__(name, dimensions=dimensions, metric=metric, embedder=embedder)
        self._records: dict[str, VectorRecord] = {}
        self._lock = threading.RLock()

    def _upsert(self, records: list[VectorRecord]) -> None:
        with self._lock:
            self._records.update((r.id, r) for r in records)

    def _delete_ids(self, ids: list[str]) -> None:
        with self._lock:
            for id in ids:
                self._records.pop(id, None)

    def _delete_where(self, filter: Filter) -> None:
        with self._lock:
            self._delete_ids([r.id for r in self._matching(filter)])

    def _replace_where(self, filter: Filter, records: list[VectorRecord]) -> None:
        with self._lock:
            self._delete_where(filter)
            self._upsert(records)

    def _matching(self, filter: Filter | None) -> list[VectorRecord]:
        with self._lock:
            records = list(self._records.values())
        return records if filter is None else [r for r in records if filter.matches(r.metadata)]

    def _search(self, vector: list[float], filter: Filter | None, limit: int) -> list[VectorMatch]:
        candidates = self._matching(filter)
        if not candidates:
            return []
        matrix = np.asarray([r.embedding for r in candidates], dtype=np.float64)
        found = scores(matrix, np.asarray(vector, dtype=np.float64), self.metric)
        best = np.argsort(-found, kind="stable")[:limit]
        return [
            VectorMatch(id=candidates[i].id, score=float(found[i]), text=candidates[i].text,
                        metadata=dict(candidates[i].metadata))
            for i in best
        ]

    def _count(self, filter: Filter | None) -> int:
        return len(self._matching(filter))


class MemoryStore(VectorStore):
    """Collections that live as long as the process."""

    def __init__(self, *, dimensions: int, metric: Metric = DEFAULT_METRIC, embedder: QueryEmbedder | None = None):
        super().__init__(dimensions=dimensions, metric=metric, embedder=embedder)
        self._held: dict[str, MemoryCollection] = {}
        self._lock = threading.Lock()

    def _ensure(self, name: str) -> Collection:
        with self._lock:
            if name not in self._held:
                self._held[name] = MemoryCollection(
                    name, dimensions=self.dimensions, metric=self.metric, embedder=self.embedder
                )
            return self._held[name]

    def _drop(self, name: str) -> None:
        with self._lock:
            self._held.pop(name, None)

    def _reset(self, name: str) -> None:
        with self._lock:
            held = self._held[name]
        with held._lock:
            held._records.clear()

    def _list(self) -> list[str]:
        with self._lock:
            return list(self._held)
