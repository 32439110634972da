"""Filters into Qdrant's language: what Qdrant says exactly goes to it, the rest is checked in Python (its
answers, on every kind of value: QdrantContract in test_points.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("qdrant_client")

from store.vectors.filters import Filter
from store.vectors.qdrant import split_filter


def test_split_keeps_native_parts_of_a_top_level_and_in_qdrant() -> None:
    where, residual = split_filter(Filter.eq("kind", "call") & Filter.gte("at", "2026-10-01"))
    assert where is not None
    assert residual == Filter.gte("at", "2026-10-01")
    assert split_filter(Filter.eq("kind", "call"))[1] is None
    assert split_filter(Filter.eq("a", 1) | Filter.lt("at", "b")) == (None, Filter.eq("a", 1) | Filter.lt("at", "b"))


def test_a_filter_qdrant_says_exactly_leaves_no_residual_and_none_is_no_filter() -> None:
    assert split_filter(None) == (None, None)
    where, residual = split_filter(Filter.any_of("kind", ["call", "note"]) & Filter.eq("owner.id", 1))
    assert where is not None and residual is None
