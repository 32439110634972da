"""Decoded keyword postings of one process, least recently used first out, within a byte budget.

A segment's postings of a term only ever shrink once written (a merge writes a new segment; a delete purges its
rows' postings, ``purging.purge``), so their count names their version: decoded arrays stay right for as long
as the segment holds that many postings of the term. A search sends the count of what it holds and reads again
what changed; one that finds a term's segments gone forgets them. Why: the common terms come back in query
after query, and reading and decoding their postings is most of a keyword search's time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from store.vectors.keyword import bm25

__all__ = ["BUDGET_BYTES", "Decoded", "PostingsCache", "shared"]

#: The bytes of decoded postings one process keeps (32 a posting with its weights: about 8 million postings).
BUDGET_BYTES = 256 * 2**20


class Decoded:
    """A term's postings in one segment: kwdocs (int64), term frequencies and row lengths (float64), and the
    BM25 term weights before the idf for the last avgdl asked (``weights``)."""

    __slots__ = ("_weighed", "docs", "length", "nbytes", "tf")

    def __init__(self, docs: np.ndarray, tf: np.ndarray, length: np.ndarray) -> None:
        self.docs, self.tf, self.length = docs, tf, length
        self.nbytes = docs.nbytes + tf.nbytes * 2 + length.nbytes
        self._weighed: tuple[float, np.ndarray] | None = None

    def weights(self, avgdl: float) -> np.ndarray:
        """``tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avgdl))``, as ``bm25.term_weights`` has it."""
        weighed = self._weighed
        if weighed is None or weighed[0] != avgdl:
            norm = bm25.K1 * (1 - bm25.B + bm25.B * self.length / avgdl)
            weighed = (avgdl, self.tf * (bm25.K1 + 1) / (self.tf + norm))
            self._weighed = weighed  # one tuple: a thread reading meanwhile sees the old pair or the new one
        return weighed[1]


class PostingsCache:
    """``(table, term, segment) -> Decoded``; safe to share between threads."""

    def __init__(self, budget: int = BUDGET_BYTES) -> None:
        self.budget, self.used = budget, 0
        self._items: OrderedDict[tuple[str, str, int], Decoded] = OrderedDict()
        self._segments: dict[tuple[str, str], set[int]] = {}
        self._lock = threading.Lock()

    def held(self, table: str, term: str) -> set[int]:
        """The segments of ``term`` whose postings are here."""
        with self._lock:
            return set(self._segments.get((table, term), ()))

    def versions(self, table: str, term: str) -> dict[int, int]:
        """The segments of ``term`` whose postings are here, each with its count of postings (its version)."""
        with self._lock:
            return {seg: len(self._items[(table, term, seg)].docs) for seg in self._segments.get((table, term), ())}

    def get(self, table: str, term: str, seg: int) -> Decoded | None:
        with self._lock:
            found = self._items.get((table, term, seg))
            if found is not None:
                self._items.move_to_end((table, term, seg))
            return found

    def put(self, table: str, term: str, seg: int, decoded: Decoded) -> None:
        size = decoded.nbytes
        if size > self.budget:
            return
        with self._lock:
            key = (table, term, seg)
            held = self._items.get(key)
            if held is not None and len(held.docs) == len(decoded.docs):
                return
            self._remove(key)  # another count: the postings purged since
            self._items[key] = decoded
            self._segments.setdefault((table, term), set()).add(seg)
            self.used += size
            while self.used > self.budget:
                self._remove(next(iter(self._items)))

    def keep_only(self, table: str, term: str, segs: set[int]) -> None:
        """Forget ``term``'s segments other than ``segs`` (merged away since they were read)."""
        with self._lock:
            for seg in self._segments.get((table, term), set()) - segs:
                self._remove((table, term, seg))

    def discard(self, table: str, term: str, seg: int) -> None:
        """Forget ``term``'s postings in ``seg`` (a purge rewrote them)."""
        with self._lock:
            self._remove((table, term, seg))

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._segments.clear()
            self.used = 0

    def _remove(self, key: tuple[str, str, int]) -> None:
        decoded = self._items.pop(key, None)
        if decoded is None:
            return
        self.used -= decoded.nbytes
        table, term, seg = key
        segs = self._segments.get((table, term))
        if segs is not None:
            segs.discard(seg)
            if not segs:
                del self._segments[(table, term)]


_shared = PostingsCache()


def shared() -> PostingsCache:
    """This process's cache."""
    return _shared
