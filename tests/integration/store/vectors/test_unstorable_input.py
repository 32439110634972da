"""A NUL character or a lone surrogate where no backend can store one: every backend refuses it alike, with a
message naming the value and the fix, and nothing stored changes (issue 32, defect 7)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store import ConfigError, Filter, VectorRecord
from store.vectors.records import validate_metadata
from tests.backends import BACKENDS, StoreFactory, make_store_factory, unique_name


@pytest.fixture(params=BACKENDS)
def make_store(request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
    yield from make_store_factory(request, request.param)


@pytest.mark.parametrize("value", ["ca\x00ll", "sur\ud800"])
def test_a_filter_value_no_row_can_hold_is_refused_by_every_backend(make_store: StoreFactory, value: str) -> None:
    """pgvector answered with PostgreSQL's multi-line "unsupported Unicode escape sequence"; memory and Qdrant
    returned nothing."""
    collection = make_store().get_collection(unique_name(), create=True)
    collection.upsert(VectorRecord("a", [1.0, 0.0, 0.0, 0.0], "a call", {"kind": "call"}))
    with pytest.raises(ConfigError, match=r"filter value .* for 'kind' holds a NUL character or a lone surrogate"):
        collection.search([1.0, 0.0, 0.0, 0.0], filter=Filter.eq("kind", value))
    with pytest.raises(ConfigError, match="holds a NUL character"):
        collection.delete_where(Filter.from_dict({"kind": {"$in": ["call", value]}}))
    assert [m.id for m in collection.search([1.0, 0.0, 0.0, 0.0], filter=Filter.eq("kind", "call"))] == ["a"]


def test_metadata_keys_that_differ_only_by_a_nul_are_refused_not_merged() -> None:
    """Both became "a", and key order decided which value survived."""
    with pytest.raises(ConfigError, match=r"key 'a\\\\x00' holds a NUL character .*: rename the key"):
        validate_metadata({"a\x00": 1, "a": 2}, record_id="r1")
    assert validate_metadata({"a": "x\x00y"}, record_id="r1") == {"a": "xy"}  # a value loses the character
