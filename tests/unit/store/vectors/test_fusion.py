"""Weighted reciprocal rank fusion (store/vectors/fusion.py), with values worked out by hand."""

from __future__ import annotations

import pytest

from store.vectors.fusion import fuse, window
from store.vectors.records import VectorMatch


def matches(*ids: str) -> list[VectorMatch]:
    return [VectorMatch(id=id, score=0.0, text=id.upper(), metadata={"id": id}) for id in ids]


def test_equal_weights_add_one_over_k_plus_rank() -> None:
    fused = fuse([(1.0, matches("a", "b", "c")), (1.0, matches("c", "a", "d"))], rrf_k=60, limit=10)
    # a: 1/61 + 1/62 = 0.032522; c: 1/63 + 1/61 = 0.032266; b: 1/62 = 0.016129; d: 1/63 = 0.015873
    assert [m.id for m in fused] == ["a", "c", "b", "d"]
    assert [m.score for m in fused] == pytest.approx([1 / 61 + 1 / 62, 1 / 63 + 1 / 61, 1 / 62, 1 / 63])


def test_weights_scale_each_legs_share() -> None:
    fused = fuse([(2.0, matches("a", "b")), (1.0, matches("b", "c"))], rrf_k=1, limit=3)
    # a: 2/2 = 1.0; b: 2/3 + 1/2 = 1.1667; c: 1/3
    assert [(m.id, round(m.score, 4)) for m in fused] == [("b", 1.1667), ("a", 1.0), ("c", 0.3333)]


def test_ties_go_to_the_smaller_id_and_limit_cuts() -> None:
    fused = fuse([(1.0, matches("z", "y")), (1.0, matches("y", "z"))], rrf_k=60, limit=1)
    assert [m.id for m in fused] == ["y"]  # both 1/61 + 1/62


def test_a_zero_weight_leg_adds_nothing_and_text_comes_from_the_first_leg() -> None:
    fused = fuse([(1.0, matches("a")), (0.0, matches("b"))], rrf_k=60, limit=5)
    assert [(m.id, m.text, m.metadata) for m in fused] == [("a", "A", {"id": "a"})]


def test_the_window_keeps_records_beyond_both_legs_out_of_the_top() -> None:
    assert window(10, vector_weight=1, keyword_weight=1, rrf_k=60) == 80  # (60 + 10) * 2 - 60
    assert window(10, vector_weight=2, keyword_weight=1, rrf_k=60) == 45  # ceil(70 * 1.5) - 60
    assert window(10, vector_weight=1, keyword_weight=0, rrf_k=60) == 10  # one leg decides alone
    assert window(5000, vector_weight=1, keyword_weight=1, rrf_k=60) == 10_000  # capped
    # The bound: a record at rank window + 1 in both legs scores below the limit-th of one leg alone.
    for limit, k in ((1, 1), (10, 60), (100, 60), (7, 500)):
        depth = window(limit, vector_weight=1, keyword_weight=1, rrf_k=k)
        assert 2 / (k + depth + 1) < 1 / (k + limit)
