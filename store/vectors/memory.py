"""The memory backend: exact search with numpy; the reference the other backends must match.

``replace_where`` holds the collection's lock, so readers see the old set or
the new set, never both or neither. Keyword search is the reference BM25
(``store.vectors.keyword.bm25``): each record's terms are counted at write, and
the statistics (N, avgdl, df) are computed over the whole collection at query time.
"""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np

from store.vectors.base import DEFAULT_METRIC, Collection, Metric, QueryEmbedder, VectorStore
from store.vectors.filters import MISSING, Filter, lookup
from store.vectors.keyword import bm25
from store.vectors.records import ChunkDigest, StoredChunk, VectorMatch, VectorRecord, text_digest
from store.vectors.rules import Declared, Rules, settle

__all__ = ["MemoryCollection", "MemoryStore", "scores"]


def scores(matrix: np.ndarray, query: np.ndarray, metric: Metric) -> np.ndarray:
    """Higher is closer: cosine similarity, dot product, or 1/(1+euclidean distance)."""
    if metric == "dot":
        found: np.ndarray = matrix @ query
    elif metric == "cosine":
        found = (matrix @ query) / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
    else:
        found = 1.0 / (1.0 + np.linalg.norm(matrix - query, axis=1))
    return found


def _owner(record: VectorRecord) -> str | None:
    """The record a chunk belongs to, as ``Filter.eq("record_id", ...)`` finds it (a string)."""
    owner = record.metadata.get("record_id")
    return owner if isinstance(owner, str) else None


class MemoryCollection(Collection):
    """Records in a dict; search scans the records that match the filter."""

    def __init__(self, name: str, *, dimensions: int, metric: Metric, embedder: QueryEmbedder | None = None):
        super().__init__(name, dimensions=dimensions, metric=metric, embedder=embedder)
        self._records: dict[str, VectorRecord] = {}
        #: Each record's ``text_digest``, made when it is written, as the other backends keep it in a column.
        self._hashes: dict[str, str] = {}
        #: Each record's term frequencies, made by the analyzer ``_analyzed_by`` names.
        self._terms: dict[str, Counter[str]] = {}
        self._analyzed_by = self._terms_identity()
        #: Each record's chunk ids, so a record's swap or read does not scan the collection.
        self._owned: dict[str, set[str]] = {}
        self._lock = threading.RLock()

    def _upsert(self, records: list[VectorRecord]) -> None:
        with self._lock:
            terms = self._term_index()
            self._disown([r.id for r in records])  # a chunk written again may have changed owner
            self._records.update((r.id, r) for r in records)
            for r in records:
                if (owner := _owner(r)) is not None:
                    self._owned.setdefault(owner, set()).add(r.id)
            self._hashes.update((r.id, text_digest(r.text)) for r in records)
            if self.keyword_analyzer is not None:
                terms.update((r.id, self.keyword_analyzer.frequencies(r.text)) for r in records)

    def _delete_ids(self, ids: list[str]) -> None:
        with self._lock:
            self._disown(ids)
            for id in ids:
                self._records.pop(id, None)
                self._hashes.pop(id, None)
                self._terms.pop(id, None)

    def _disown(self, ids: list[str]) -> None:
        """Take ``ids`` out of their owners' sets, before they are deleted or written again."""
        for id in ids:
            held = self._records.get(id)
            owner = None if held is None else _owner(held)
            if owner is not None and owner in self._owned:
                self._owned[owner].discard(id)
                if not self._owned[owner]:
                    del self._owned[owner]

    def _of_records(self, record_ids: list[str]) -> list[VectorRecord]:
        """The chunks of ``record_ids``, through the owner index: what ``record_id`` in ``record_ids`` matches."""
        with self._lock:
            return [self._records[i] for r in dict.fromkeys(record_ids) for i in self._owned.get(r, ())]

    def _term_index(self) -> dict[str, Counter[str]]:
        """The records' term frequencies, analyzed again when the collection's language changed or its keyword
        index was turned on; none while it is off (``keyword_analyzer``)."""
        with self._lock:
            wanted = self._terms_identity()
            if self._analyzed_by != wanted:
                terms_of = self.keyword_analyzer
                self._terms = (
                    {} if terms_of is None else {i: terms_of.frequencies(r.text) for i, r in self._records.items()}
                )
                self._analyzed_by = wanted
            return self._terms

    def _terms_identity(self) -> str | None:
        return None if self.keyword_analyzer is None else self.keyword_analyzer.identity

    def _delete_where(self, filter: Filter) -> None:
        with self._lock:
            self._delete_ids([r.id for r in self._matching(filter)])

    def _replace_records(self, record_ids: list[str], records: list[VectorRecord]) -> None:
        with self._lock:
            self._delete_ids([r.id for r in self._of_records(record_ids)])
            self._upsert(records)

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
            VectorMatch(
                id=candidates[i].id,
                score=float(found[i]),
                text=candidates[i].text,
                metadata=dict(candidates[i].metadata),
            )
            for i in best
        ]

    def _keyword_search(self, terms: list[str], filter: Filter | None, limit: int) -> list[VectorMatch]:
        with self._lock:
            index = self._term_index()
            held = [(self._records[id], counts) for id, counts in index.items() if counts]
        if not held:
            return []
        lengths = np.asarray([sum(counts.values()) for _, counts in held], dtype=np.float64)
        tf = np.asarray([[counts.get(t, 0) for t in terms] for _, counts in held], dtype=np.float64)
        df = np.count_nonzero(tf, axis=0)
        idf = np.asarray([bm25.idf(int(d), len(held)) for d in df])
        found = bm25.term_weights(tf, lengths, float(lengths.mean())) @ idf
        scored = [i for i in np.flatnonzero(tf.any(axis=1)) if filter is None or filter.matches(held[i][0].metadata)]
        best = sorted(scored, key=lambda i: (-found[i], held[i][0].id))[:limit]
        return [
            VectorMatch(
                id=held[i][0].id, score=float(found[i]), text=held[i][0].text, metadata=dict(held[i][0].metadata)
            )
            for i in best
        ]

    def _count(self, filter: Filter | None) -> int:
        return len(self._matching(filter))

    def _holds(self, field: str) -> bool:
        return any(lookup(r.metadata, field) not in (MISSING, None, []) for r in self._matching(None))

    def _chunks_of(self, record_id: str) -> list[StoredChunk]:
        return [
            StoredChunk(r.id, int(r.metadata.get("chunk", 0)), r.text, r.model) for r in self._of_records([record_id])
        ]

    def _vectors_by_hash(self, hashes: list[str], model: str) -> list[tuple[str, list[float]]]:
        wanted = set(hashes)
        with self._lock:
            held = [(self._hashes[r.id], r) for r in self._records.values() if r.model == model]
        return [(digest, list(r.embedding)) for digest, r in held if digest in wanted]

    def _chunk_digests(self, record_ids: list[str]) -> list[ChunkDigest]:
        return [
            ChunkDigest(
                r.id,
                str(r.metadata["record_id"]),
                int(r.metadata.get("chunk", 0)),
                text_digest(r.text),
                r.model,
                len(r.embedding),
            )
            for r in self._of_records(record_ids)
        ]

    def _record_ids_page(self, after: str | None, limit: int) -> list[tuple[str, int]]:
        owners = Counter(str(r.metadata["record_id"]) for r in self._matching(None) if "record_id" in r.metadata)
        return sorted((i, n) for i, n in owners.items() if after is None or i > after)[:limit]


class MemoryStore(VectorStore):
    """Collections that live as long as the process."""

    def __init__(self, *, dimensions: int, metric: Metric = DEFAULT_METRIC, embedder: QueryEmbedder | None = None):
        super().__init__(dimensions=dimensions, metric=metric, embedder=embedder)
        self._held: dict[str, MemoryCollection] = {}
        self._lock = threading.Lock()

    def _ensure(self, name: str, declared: Declared | None) -> Collection:
        with self._lock:
            held = self._held.get(name)
            if held is None:
                held = MemoryCollection(name, dimensions=self.dimensions, metric=self.metric, embedder=self.embedder)
                held.rules = settle(name, None, declared)
                self._held[name] = held
            else:
                held.rules = settle(name, held.rules, declared)
            return held

    def _set_rules(self, name: str, rules: Rules) -> int:
        with self._lock:
            held = self._held[name]
        with held._lock:
            held.rules = rules
            held.search_settings = held.search_settings.model_copy(
                update={"keywords": rules.keywords, "language": rules.language}
            )
            held._term_index()
            return len(held._records) if rules.keywords else 0

    def _drop(self, name: str) -> None:
        with self._lock:
            self._held.pop(name, None)

    def _reset(self, name: str) -> None:
        with self._lock:
            held = self._held[name]
        with held._lock:
            held._records.clear()
            held._hashes.clear()
            held._terms.clear()
            held._owned.clear()

    def _list(self) -> list[str]:
        with self._lock:
            return list(self._held)
