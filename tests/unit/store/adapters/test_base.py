"""store/adapters/base.py: what the framework adapters share, a search of one collection under a fixed filter
ANDed with each call's, so a call narrows the adapter's scope and never widens it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from producer.testing import memory_settings
from store import Client, ConfigError, Filter, VectorRecord
from store.adapters.base import FilterLike, asearch, merged, search
from store.vectors.backends import memory_store

RECORDS = [
    VectorRecord("a", [1, 0, 0, 0], "alpha", {"workspace": 1, "kind": "call"}),
    VectorRecord("b", [1, 0.1, 0, 0], "beta", {"workspace": 1, "kind": "email"}),
    VectorRecord("c", [1, 0.2, 0, 0], "gamma", {"workspace": 2, "kind": "call"}),
]


@dataclass
class Scope:
    client: Client | None
    collection: str
    filter: FilterLike | None


@pytest.fixture
def client() -> Any:
    store = memory_store(dimensions=4)
    store.get_collection("notes", create=True).upsert_many(RECORDS)
    settings = memory_settings({"vectors": {"store": "memory", "dimensions": 4}, "collections": {"notes": {}}})
    with Client(settings, store=store) as built:
        yield built


def test_merged_ands_the_fixed_filter_with_the_call_s_either_may_be_none() -> None:
    fixed, call = Filter.eq("workspace", 1), Filter.eq("kind", "call")
    assert merged(None, None) is None
    assert merged(fixed, None) == fixed and merged(None, call) == call
    assert merged(fixed, call) == fixed & call
    assert merged({"workspace": 1}, {"kind": "call"}) == fixed & call  # their JSON forms too


def test_a_call_s_filter_narrows_the_scope_and_never_widens_it(client: Client) -> None:
    scope = Scope(client, "notes", {"workspace": 1})
    assert [m.id for m in search(scope, [1, 0, 0, 0], limit=10)] == ["a", "b"]
    assert [m.id for m in search(scope, [1, 0, 0, 0], filter={"kind": "call"}, limit=10)] == ["a"]
    assert search(scope, [1, 0, 0, 0], filter={"workspace": 2}, limit=10) == []  # inside workspace 1 still
    found = asyncio.run(asearch(scope, [1, 0, 0, 0], filter={"kind": "email"}, limit=10))
    assert [m.id for m in found] == ["b"]


def test_options_the_adapters_do_not_name_pass_through_to_the_client(client: Client) -> None:
    scope = Scope(client, "notes", None)
    assert [m.id for m in search(scope, [1, 0, 0, 0], limit=10, options={"min_score": 0.999})] == ["a"]
    with pytest.raises(TypeError, match="unexpected keyword argument 'limt'"):
        search(scope, [1, 0, 0, 0], limit=10, options={"limt": 3})
    with pytest.raises(ConfigError):
        search(scope, [1, 0, 0, 0], filter={"kind": object()}, limit=10)
