"""store.Client: one object over the settings; parts built on first use, closed by close() (the default one:
``tests/unit/store/process/test_defaults.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from producer.testing import memory_settings
from store import Client, ConfigError, Settings, VectorRecord, VectorsyncError
from store.client import Hooks
from store.state.ledger import MemoryLedger
from store.vectors.backends import memory_store


def settings(**collections: Any) -> Settings:
    return memory_settings({"vectors": {"store": "memory", "dimensions": 4}, "collections": collections})


class Spy:
    """Counts close() calls of a part passed in."""

    def __init__(self, part: Any) -> None:
        self.part, self.closed = part, 0
        original = part.close

        def close() -> None:
            self.closed += 1
            original()

        part.close = close


def test_a_vector_search_needs_no_embedding_model() -> None:
    unreachable = settings(notes={}).model_copy(update={"models": {}})
    unreachable = unreachable.model_copy(
        update={"embeddings": unreachable.embeddings.model_copy(update={"chain": ["missing"]})}
    )
    with Client(unreachable) as client:
        client.store.get_collection("notes", create=True).upsert(VectorRecord("a", [1, 0, 0, 0], "alpha"))
        assert [m.id for m in client.search("notes", [1, 0, 0, 0])] == ["a"]  # the chain is never built
        with pytest.raises(ConfigError, match="missing"):
            client.search("notes", "a text needs the chain")


def test_a_part_is_built_at_its_first_use_so_an_enqueueing_client_needs_no_vector_store() -> None:
    client = Client(Settings.model_validate({"vectors": {"store": "qdrant"}}))
    assert client.producer.settings is client.settings  # no store was needed for that
    with pytest.raises(ConfigError, match="vectors.url is required for the qdrant store"):
        client.store  # noqa: B018
    client.close()


def test_search_reads_the_clients_store_and_the_declared_collections() -> None:
    store = memory_store(dimensions=4)
    with Client(settings(notes={}), store=store) as client:
        assert client.search("notes", [1, 0, 0, 0]) == []  # declared: created empty, not an error
        store.get_collection("notes", create=True).upsert(VectorRecord("a", [1, 0, 0, 0], "alpha", {"kind": "call"}))
        assert [m.id for m in client.search("notes", [1, 0, 0, 0], filter={"kind": "call"})] == ["a"]
        assert client.search("notes", [1, 0, 0, 0], filter={"kind": "email"}) == []
        with pytest.raises(ConfigError, match="collection 'typo' does not exist"):
            client.search("typo", [1, 0, 0, 0])


def test_close_releases_what_the_client_built_and_leaves_what_it_was_given() -> None:
    given_store, given_ledger = Spy(memory_store(dimensions=4)), Spy(MemoryLedger())
    client = Client(settings(notes={}), store=given_store.part, ledger=given_ledger.part)
    built_embeddings = Spy(client.embeddings)
    built_producer = Spy(client.producer)
    client.search("notes", [1, 0, 0, 0])
    client.close()
    assert (given_store.closed, given_ledger.closed) == (0, 0)
    assert (built_embeddings.closed, built_producer.closed) == (1, 1)
    with pytest.raises(VectorsyncError, match="this Client is closed: its producer is gone"):
        client.producer  # noqa: B018  (never built again behind the caller's back)
    assert client.store is given_store.part  # what it was given stays its own
    client.close()  # again: nothing to do


def test_the_producer_of_a_client_given_a_ledger_creates_its_runs_there() -> None:
    ledger = MemoryLedger()
    sent: list[tuple[str, Any]] = []
    notes = {"source": {"kind": "python", "loader": "tests.unit.worker.pipeline.test_hostile_input:load_records"}}
    send = lambda name, **kw: sent.append((name, kw["args"]))  # noqa: E731
    with Client(settings(notes=notes), ledger=ledger, hooks=Hooks(send=send)) as client:
        run_id = client.producer.reindex_all("notes")  # a collection with a source: pushed ones have none to read
    assert ledger.run(run_id).collection == "notes"
    assert sent == [("vectorsync.reindex_all", ("notes", False, run_id, False))]
