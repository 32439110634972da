"""The record-level metrics against values worked out by hand on a tiny labelled set."""

from __future__ import annotations

import math

import pytest

from store.evaluation import ndcg_at_k, percentile, ranked_records, recall_at_k, reciprocal_rank_at_k
from store.vectors import VectorMatch


def chunk(record: str, number: int) -> VectorMatch:
    return VectorMatch(f"{record}:{number}", 1.0, "", {"record_id": record, "chunk": number})


#: A search's chunks: r1 has two, and its second (rank 3) must not count again.
MATCHES = [chunk("r2", 0), chunk("r1", 0), chunk("r1", 1), chunk("r4", 0), chunk("r3", 0)]
RELEVANT = frozenset({"r1", "r3"})


def test_a_record_counts_once_at_the_rank_of_its_best_chunk() -> None:
    assert ranked_records(MATCHES) == ["r2", "r1", "r4", "r3"]


def test_a_match_without_record_id_is_its_own_record() -> None:
    assert ranked_records([VectorMatch("doc-7", 0.5, "", {}), chunk("r1", 0)]) == ["doc-7", "r1"]


def test_recall_counts_the_relevant_records_in_the_first_k() -> None:
    ranked = ranked_records(MATCHES)
    assert recall_at_k(ranked, RELEVANT, 3) == 0.5  # r1 of {r1, r3}
    assert recall_at_k(ranked, RELEVANT, 10) == 1.0
    assert recall_at_k(ranked, RELEVANT, 1) == 0.0


def test_reciprocal_rank_is_one_over_the_first_relevant_rank_within_k() -> None:
    ranked = ranked_records(MATCHES)
    assert reciprocal_rank_at_k(ranked, RELEVANT, 10) == 0.5  # r1 at record rank 2, not chunk rank 2 or 3
    assert reciprocal_rank_at_k(ranked, RELEVANT, 1) == 0.0
    assert reciprocal_rank_at_k(ranked, frozenset({"r3"}), 10) == 0.25


def test_ndcg_by_hand() -> None:
    ranked = ranked_records(MATCHES)
    # k=3: r1 at rank 2 gains 1/log2(3) = 0.63093; the ideal puts r1, r3 at 1, 2: 1 + 0.63093 = 1.63093.
    assert ndcg_at_k(ranked, RELEVANT, 3) == pytest.approx(0.63093 / 1.63093, abs=1e-5)
    assert ndcg_at_k(ranked, RELEVANT, 3) == pytest.approx(0.38685, abs=1e-5)
    # k=10: r3 at rank 4 adds 1/log2(5) = 0.43068.
    assert ndcg_at_k(ranked, RELEVANT, 10) == pytest.approx((0.63093 + 0.43068) / 1.63093, abs=1e-5)
    assert ndcg_at_k(ranked, RELEVANT, 10) == pytest.approx(0.65093, abs=1e-5)
    assert ndcg_at_k(["r1", "r3"], RELEVANT, 10) == 1.0


def test_ndcg_ideal_is_capped_at_k() -> None:
    # Three relevant, k=2: the ideal is two relevant at ranks 1 and 2, so finding both top is a perfect 1.
    assert ndcg_at_k(["a", "b", "x"], frozenset({"a", "b", "c"}), 2) == 1.0
    assert ndcg_at_k(["x", "a"], frozenset({"a", "b", "c"}), 2) == pytest.approx(
        (1 / math.log2(3)) / (1 + 1 / math.log2(3))
    )


def test_nothing_found_scores_zero() -> None:
    assert recall_at_k([], frozenset({"r9"}), 10) == 0.0
    assert reciprocal_rank_at_k(["r1"], frozenset({"r9"}), 10) == 0.0
    assert ndcg_at_k(["r1"], frozenset({"r9"}), 10) == 0.0


def test_percentile_interpolates_between_ranks_as_numpy_does() -> None:
    values = [10.0, 1.0, 3.0, 2.0]  # sorted 1, 2, 3, 10
    assert percentile(values, 50) == 2.5
    assert percentile(values, 95) == pytest.approx(3 + 0.85 * 7)  # position 2.85
    assert percentile([4.0], 95) == 4.0
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 10.0
    with pytest.raises(ValueError):
        percentile([], 50)
