"""Retrieval metrics at record level, binary relevance: recall@k, reciprocal rank@k, nDCG@k, percentiles.

A search returns chunks; ``ranked_records`` turns them into records, each at the rank of its best chunk
(the record id is the chunk's ``record_id`` metadata, else the chunk id). Every metric reads the first
``k`` records of that ranking and a set of relevant record ids.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet

from store.vectors.records import VectorMatch

__all__ = ["ndcg_at_k", "percentile", "ranked_records", "recall_at_k", "reciprocal_rank_at_k"]


def ranked_records(matches: Iterable[VectorMatch]) -> list[str]:
    """Record ids in the order of their best chunk; a record counts once."""
    seen: dict[str, None] = {}
    for match in matches:
        record = match.metadata.get("record_id")
        seen.setdefault(record if isinstance(record, str) else match.id, None)
    return list(seen)


def recall_at_k(ranked: Sequence[str], relevant: AbstractSet[str], k: int) -> float:
    """Share of the relevant records found in the first ``k``."""
    return sum(1 for record in set(ranked[:k]) if record in relevant) / len(relevant)


def reciprocal_rank_at_k(ranked: Sequence[str], relevant: AbstractSet[str], k: int) -> float:
    """1 / the rank of the first relevant record within the first ``k``; 0 when none is."""
    for rank, record in enumerate(ranked[:k], start=1):
        if record in relevant:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(ranked: Sequence[str], relevant: AbstractSet[str], k: int) -> float:
    """Discounted cumulative gain of the first ``k`` (gain 1 per relevant record, discount log2(rank + 1)),
    over that of the ideal ranking (every relevant record first)."""
    gained = sum(1.0 / math.log2(rank + 1) for rank, record in enumerate(ranked[:k], start=1) if record in relevant)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(k, len(relevant)) + 1))
    return gained / ideal


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0 to 100) by linear interpolation between the closest ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * p / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
