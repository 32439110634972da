"""store/retrieval/search.py: one search of one collection under a search's options, their defaults applied in
this one place, and a filter read from its JSON form."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from store.errors import ConfigError
from store.retrieval.matches import Matches
from store.retrieval.search import as_filter, searched
from store.vectors.backends import memory_store
from store.vectors.base import DEFAULT_LIMIT
from store.vectors.filters import Filter
from store.vectors.records import VectorRecord

VECTOR = [1.0, 0.0, 0.0, 0.0]


class _Target:
    """A collection that records the keywords of its search, and the fields it is asked whether a record holds."""

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}
        self.asked: list[tuple[str, ...]] = []

    def search(self, query: str | Sequence[float], **options: Any) -> list[Any]:
        self.seen = options
        return []

    def unheld_fields(self, fields: Sequence[str]) -> tuple[str, ...]:
        self.asked.append(tuple(fields))
        return tuple(field for field in fields if field != "kind")


def _memory_notes() -> Any:
    store = memory_store(dimensions=4)
    notes = store.get_collection("crm_notes", create=True)
    notes.upsert_many(
        [
            VectorRecord("n1", [1, 0, 0, 0], "renewal call", {"owner": 7, "kind": "call"}),
            VectorRecord("n2", [0, 1, 0, 0], "pricing email", {"owner": 8, "kind": "email"}),
        ]
    )
    return notes


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


def test_an_empty_filtered_search_names_the_fields_no_record_holds() -> None:
    notes = _memory_notes()
    found = searched(notes, VECTOR, {"filter": {"owner_id": 7, "kind": "call", "$or": [{"team.id": 1}, {"n": 2}]}})
    assert found == [] and found.unknown_fields == ("owner_id", "team.id", "n")
    none_match = searched(notes, VECTOR, {"filter": {"owner": 9}})  # a field they hold, a value none has
    assert none_match == [] and none_match.unknown_fields == ()
    assert searched(notes, VECTOR, {"filter": {"owner": 7}}).unknown_fields == ()
    assert searched(notes, VECTOR, {}).unknown_fields == ()


def test_only_an_empty_filtered_result_looks_the_fields_up() -> None:
    target = _Target()
    assert searched(target, VECTOR, {"filter": {"owner_id": 7, "kind": "call"}}).unknown_fields == ("owner_id",)
    assert target.asked == [("owner_id", "kind")]
    searched(target, VECTOR, {})
    assert target.asked == [("owner_id", "kind")]  # no filter: nothing asked


def test_a_search_that_finds_something_asks_nothing_more() -> None:
    notes = _memory_notes()
    notes.unheld_fields = lambda fields: pytest.fail(f"asked about {fields}")  # type: ignore[method-assign]
    found = searched(notes, VECTOR, {"filter": {"owner": 7}})
    assert [m.id for m in found] == ["n1"] and found.unknown_fields == ()


def test_as_filter_takes_a_filter_as_it_is_and_reads_its_json_form() -> None:
    kept = Filter.eq("kind", "call") & Filter.any_of("owner", [1, 2])
    assert as_filter(kept) is kept
    assert as_filter(None) is None
    assert as_filter({"kind": "call"}) == Filter.eq("kind", "call")
    assert as_filter(kept.to_dict()) == kept
    with pytest.raises(ConfigError):
        as_filter({"kind": object()})
