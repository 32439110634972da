"""store/process/defaults.py: one default client per process, which store.query's and producer's functions use,
put in its place by use_client; and the generic ProcessDefault under it."""

from __future__ import annotations

from typing import Any

from producer.testing import memory_settings
from store import Client, Settings, VectorRecord
from store import query as query_module
from store.process.defaults import ProcessDefault, default_client, default_producer, use_client
from store.vectors.backends import memory_store


def settings(**collections: Any) -> Settings:
    return memory_settings({"vectors": {"store": "memory", "dimensions": 4}, "collections": collections})


def test_query_helpers_use_the_default_client_and_use_client_puts_another_in_its_place() -> None:
    store = memory_store(dimensions=4)
    store.get_collection("notes", create=True).upsert(VectorRecord("a", [1, 0, 0, 0], "alpha"))
    mine = Client(settings(notes={}), store=store)
    previous = use_client(mine)
    try:
        assert default_client() is mine
        assert [m.id for m in query_module.search("notes", [1, 0, 0, 0])] == ["a"]
    finally:
        assert use_client(previous) is mine
        mine.close()


def test_a_process_default_is_built_once_until_replaced() -> None:
    built: list[object] = []
    default: ProcessDefault[object] = ProcessDefault(lambda: built.append(object()) or built[-1])
    first = default.get()
    assert default.get() is first and len(built) == 1
    assert default.use(None) is first
    assert default.get() is not first and len(built) == 2


def test_the_default_producer_is_the_default_client_s() -> None:
    mine = Client(settings(notes={}), store=memory_store(dimensions=4))
    previous = use_client(mine)
    try:
        assert default_producer() is mine.producer
    finally:
        assert use_client(previous) is mine
        mine.close()
