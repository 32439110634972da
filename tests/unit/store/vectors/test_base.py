"""store/vectors/base.py: the two ways to a collection, get_collection (kept open; ``create=True`` makes a missing
one) and ensure_collection (asked of the store each time, made if missing), and the names kept for one release."""

from __future__ import annotations

import pytest

from store import ConfigError, VectorRecord, memory_store


def test_get_collection_refuses_a_missing_one_and_create_makes_it_once() -> None:
    store = memory_store(dimensions=4)
    with pytest.raises(ConfigError, match="collection 'notes' does not exist"):
        store.get_collection("notes")
    assert not store.has_collection("notes")  # a get creates nothing
    made = store.get_collection("notes", create=True)
    assert store.has_collection("notes")
    assert store.get_collection("notes") is made and store.get_collection("notes", create=True) is made


def test_ensure_collection_asks_the_store_so_a_collection_dropped_elsewhere_is_made_again() -> None:
    """What a run's start asks (worker.runtime.context): another process's drop leaves this one's open collection
    behind, which get_collection keeps returning; ensure_collection makes it again, and keeps that one open."""
    store = memory_store(dimensions=4)
    first = store.ensure_collection("notes")
    first.upsert(VectorRecord("a", [1, 0, 0, 0], "alpha"))
    assert store.ensure_collection("notes").count() == 1  # an existing one opens with what it holds
    store._drop("notes")  # as another process's drop: this store still holds it open
    assert store.get_collection("notes") is first
    again = store.ensure_collection("notes")
    assert again is not first and again.count() == 0 and store.has_collection("notes")
    assert store.get_collection("notes") is again


def test_there_is_no_third_way_to_a_collection() -> None:
    store = memory_store(dimensions=4)
    assert [name for name in ("collection", "open", "create_collection", "searching") if hasattr(store, name)] == []
