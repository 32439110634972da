"""store/retrieval/search.py: one search of one collection under a search's options, their defaults applied in
this one place, and a filter read from its JSON form."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from store.errors import ConfigError
from store.retrieval.matches import Matches
from store.retrieval.search import as_filter, searched
from store.vectors.base import DEFAULT_LIMIT
from store.vectors.filters import Filter

VECTOR = [1.0, 0.0, 0.0, 0.0]


class _Target:
    """A collection that records the keywords of its search."""

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}

    def search(self, query: str | Sequence[float], **options: Any) -> list[Any]:
        self.seen = options
        return []


def test_searched_applies_the_defaults_and_reads_a_json_filter() -> None:
    target = _Target()
    searched(target, VECTOR, {})
    assert target.seen == {"filter": None, "limit": DEFAULT_LIMIT, "min_score": None, "mode": None}
    searched(target, VECTOR, {"filter": {"kind": "call"}, "limit": 3, "min_score": 0.5, "mode": "keyword"})
    assert target.seen == {"filter": Filter.eq("kind", "call"), "limit": 3, "min_score": 0.5, "mode": "keyword"}


def test_searched_returns_matches_that_refuse_await_naming_asearch() -> None:
    found = searched(_Target(), VECTOR, {})
    assert isinstance(found, Matches) and found == []
    with pytest.raises(TypeError, match=r"use `await asearch\(\.\.\.\)`"):
        found.__await__()


def test_as_filter_takes_a_filter_as_it_is_and_reads_its_json_form() -> None:
    kept = Filter.eq("kind", "call") & Filter.any_of("owner", [1, 2])
    assert as_filter(kept) is kept
    assert as_filter(None) is None
    assert as_filter({"kind": "call"}) == Filter.eq("kind", "call")
    assert as_filter(kept.to_dict()) == kept
    with pytest.raises(ConfigError):
        as_filter({"kind": object()})
