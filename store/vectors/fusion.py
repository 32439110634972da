"""Hybrid search: weighted reciprocal rank fusion of a vector leg and a keyword leg, above every backend.

A match at rank ``r`` (1 for the best) of a leg adds ``weight / (k + r)`` to its fused score; a match a leg
did not return adds nothing from that leg. Ties go to the smaller id, so every backend orders alike.

How deep each leg goes (``window``): a record beyond both legs' windows scores at most
``(wv + wk) / (k + W + 1)``, and the ``limit``-th fused match at least ``max(wv, wk) / (k + limit)``
(each leg's first ``limit`` matches score that much from that leg alone). So with

    W = ceil((k + limit) * (wv + wk) / max(wv, wk)) - k

no record outside both windows can enter the fused top ``limit``: 2 * limit + k for equal weights (80 for
``limit=10``, k 60), less when one leg outweighs the other. A record inside one window only lacks the other
leg's share, at most ``w / (k + W + 1)``; that is the usual cut-off of RRF, stated rather than hidden.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from store.settings import SearchSettings
from store.vectors.records import VectorMatch

__all__ = ["LEG_THREADS", "MAX_WINDOW", "fuse", "hybrid", "legs_pool", "window"]

#: Threads that run hybrid searches' vector legs beside their keyword legs, per process.
LEG_THREADS = 8

#: The deepest a leg goes, whatever the limit (MAX_LIMIT of a search).
MAX_WINDOW = 10_000


_pool: tuple[int, ThreadPoolExecutor] | None = None
_pool_lock = threading.Lock()


def legs_pool() -> ThreadPoolExecutor:
    """This process's threads for vector legs (made anew in a forked child: a parent's threads do not follow)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(LEG_THREADS, thread_name_prefix="vectorsync-leg"))
        return _pool[1]


def window(limit: int, *, vector_weight: float, keyword_weight: float, rrf_k: int) -> int:
    """How many matches each leg returns for a fused top ``limit`` (see the module docstring)."""
    heaviest = max(vector_weight, keyword_weight)
    if vector_weight == 0 or keyword_weight == 0:
        return limit  # one leg alone decides: its own top ``limit`` is the answer
    depth = math.ceil((rrf_k + limit) * (vector_weight + keyword_weight) / heaviest) - rrf_k
    return min(MAX_WINDOW, max(limit, depth))


def fuse(legs: Sequence[tuple[float, Sequence[VectorMatch]]], *, rrf_k: int, limit: int) -> list[VectorMatch]:
    """The ``limit`` best matches of ``legs`` (each ``(weight, matches best first)``) by weighted RRF; each
    match's ``score`` is its fused score, its text and metadata those of the first leg that returned it."""
    scores: dict[str, float] = {}
    first: dict[str, VectorMatch] = {}
    for weight, matches in legs:
        if weight == 0:
            continue
        for rank, match in enumerate(matches, start=1):
            scores[match.id] = scores.get(match.id, 0.0) + weight / (rrf_k + rank)
            first.setdefault(match.id, match)
    best = sorted(scores, key=lambda id: (-scores[id], id))[:limit]
    return [VectorMatch(id=id, score=scores[id], text=first[id].text, metadata=first[id].metadata) for id in best]


def hybrid(
    settings: SearchSettings,
    *,
    limit: int,
    parallel: bool,
    vectors: Callable[[int], list[VectorMatch]],
    keywords: Callable[[int], list[VectorMatch]],
) -> list[VectorMatch]:
    """The fused top ``limit`` of the two legs, each asked for ``window`` matches; a leg of weight 0 is not run.
    ``parallel``: the vector leg runs in ``legs_pool`` beside the keyword leg (a backend of server round trips)."""
    s = settings
    depth = window(limit, vector_weight=s.vector_weight, keyword_weight=s.keyword_weight, rrf_k=s.rrf_k)
    if not s.keyword_weight:
        return fuse([(s.vector_weight, vectors(depth))], rrf_k=s.rrf_k, limit=limit)
    if not s.vector_weight:
        return fuse([(s.keyword_weight, keywords(depth))], rrf_k=s.rrf_k, limit=limit)
    pending = legs_pool().submit(vectors, depth) if parallel else None
    found_keywords = keywords(depth)
    found_vectors = pending.result() if pending is not None else vectors(depth)
    return fuse([(s.vector_weight, found_vectors), (s.keyword_weight, found_keywords)], rrf_k=s.rrf_k, limit=limit)
