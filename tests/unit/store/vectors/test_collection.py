"""The Collection seam's counts: a tenant's reader counts within its filter, an operator counts everything."""

from __future__ import annotations

import pytest

from store import ConfigError, Filter, VectorRecord
from store.vectors.backends import memory_store


def test_count_is_scoped_as_search_is_and_total_is_the_operator_s() -> None:
    store = memory_store(dimensions=2)
    store.require_filter("notes", ["tenant"])
    notes = store.get_collection("notes", create=True)
    notes.upsert_many([VectorRecord(f"r{i}", [1, 0], "x", {"tenant": i % 2}) for i in range(5)])
    with pytest.raises(ConfigError, match="equality filter on tenant"):
        notes.count()
    with pytest.raises(ConfigError, match="tenant"):
        notes.count(Filter.any_of("tenant", [0, 1]))
    assert notes.count(Filter.eq("tenant", 0)) == 3
    assert notes.total() == 5
    assert not notes.is_empty()
