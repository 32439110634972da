"""Collection lifecycle: create, get, reset and drop, with the ledger cleared alongside.

LifecycleContract runs here on the memory store and ledger, and on pgvector and PostgreSQL in
tests/integration/store/test_lifecycle.py, with the CLI's confirmations."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from store import ConfigError, Filter, VectorRecord
from store.lifecycle import Collections, Emptied
from store.state.ledger import Forgotten, LedgerEntry, MemoryLedger
from tests.backends import make_store_factory, unique_name

RECORDS = [VectorRecord(f"r{i}:0", [1, i, 0, 0], f"note {i}", {"record_id": f"r{i}", "n": i}) for i in range(3)]


def remember(collections: Collections, name: str, *record_ids: str, failed: str = "") -> None:
    """What the pipeline would have left in the ledger: entries for ``record_ids``, a failure for ``failed``."""
    with collections.ledger.locked(name, record_ids) as held:
        held.record_indexed([LedgerEntry(i, "hash", "m", 1) for i in record_ids])
    if failed:
        collections.ledger.record_failure(name, failed, "boom")


class LifecycleContract:
    """Create, get, reset and drop over one store and ledger; a subclass gives the ``collections`` fixture."""

    def test_create_and_get_refuse_what_would_surprise_and_name_the_fix(self, collections: Collections) -> None:
        name = unique_name()
        missing = (
            rf"collection '{name}' does not exist \(existing: .*\): check the name, or declare "
            rf"\[collections.{name}\] and index it \(vectorsync reindex {name}\), or create it empty "
            rf"\(vectorsync collections create {name}\)"
        )
        with pytest.raises(ConfigError, match=missing):
            collections.get(name)
        assert not collections.exists(name)  # a get creates nothing
        collections.create(name).upsert_many(RECORDS)
        exists = (
            rf"collection '{name}' already exists: open it \(Collections.get, or get_or_create\), "
            rf"or drop it first \(vectorsync collections drop {name}\)"
        )
        with pytest.raises(ConfigError, match=exists):
            collections.create(name)
        assert collections.get(name).count() == 3 and collections.get_or_create(name).count() == 3
        other = unique_name()
        assert collections.get_or_create(other).count() == 0 and other in collections.names()

    def test_reset_empties_the_collection_and_forgets_its_ledger_keeping_schema_and_neighbours(
        self,
        collections: Collections,
    ) -> None:
        name, neighbour = unique_name(), unique_name()
        collections.store.indexed[name] = {"n": "integer"}
        collections.create(name).upsert_many(RECORDS)
        collections.create(neighbour).upsert_many(RECORDS[:1])
        remember(collections, name, "r0", "r1", failed="r2")
        remember(collections, neighbour, "r0", failed="r9")
        run_id = collections.ledger.create_run(name)

        assert collections.reset(name) == Emptied(chunks=3, forgotten=Forgotten(entries=2, failures=1))
        notes = collections.get(name)
        assert notes.count() == 0 and name in collections.names()
        assert collections.ledger.record_ids(name) == set() and collections.ledger.failures(name) == []
        assert collections.ledger.run(run_id).collection == name  # runs are history: kept
        assert collections.ledger.record_ids(neighbour) == {"r0"} and len(collections.ledger.failures(neighbour)) == 1
        assert collections.get(neighbour).count() == 1
        with pytest.raises(ConfigError, match="field 'n' = '7' is not a single integer"):  # the declared schema holds
            notes.upsert(VectorRecord("x:0", [1, 0, 0, 0], "x", {"n": "7"}))
        notes.upsert_many(RECORDS)
        assert [m.id for m in notes.search([1, 2, 0, 0], filter=Filter.gte("n", 2))] == ["r2:0"]
        if hasattr(collections.store, "engine"):  # pgvector: TRUNCATE kept every index
            table = collections.store.schema.table(name).name  # type: ignore[attr-defined]
            indexes = {i["name"] for i in sa.inspect(collections.store.engine).get_indexes(table)}  # type: ignore[attr-defined]
            assert {f"{table}_embedding_idx", f"{table}_metadata_idx"} <= indexes
            assert any("_by_" in i for i in indexes)
        stranger = unique_name()
        with pytest.raises(ConfigError, match=f"collection '{stranger}' does not exist"):
            collections.reset(stranger)

    def test_drop_deletes_the_collection_and_forgets_its_ledger(self, collections: Collections) -> None:
        name = unique_name()
        collections.create(name).upsert_many(RECORDS[:2])
        remember(collections, name, "r0", "r1")
        assert collections.drop(name) == Emptied(chunks=2, forgotten=Forgotten(entries=2, failures=0))
        assert not collections.exists(name) and collections.ledger.record_ids(name) == set()
        with pytest.raises(ConfigError, match=f"collection '{name}' does not exist"):
            collections.drop(name)
        if hasattr(collections.store, "url") and hasattr(collections.store, "engine"):  # pgvector
            from store.vectors.pgvector import PgvectorStore

            collections.create(name)
            with PgvectorStore(collections.store.url, dimensions=8) as wider:  # settings changed since it was made
                other = Collections(wider, collections.ledger)
                assert other.chunks(name) is None  # it cannot be opened ...
                assert other.drop(name).chunks is None  # ... and dropping it is the fix
            assert not collections.exists(name)

    def test_the_declared_collections_are_created_once(self, collections: Collections) -> None:
        first, second = unique_name(), unique_name()
        collections.create(first)
        declared = Collections(collections.store, collections.ledger, declared=[first, second])
        assert declared.create_declared() == [second]
        assert declared.create_declared() == []
        assert {first, second} <= set(collections.names())


class TestMemoryLifecycle(LifecycleContract):
    @pytest.fixture
    def collections(self, request: pytest.FixtureRequest) -> Iterator[Collections]:
        for make in make_store_factory(request, "memory"):
            yield Collections(make(dimensions=4), MemoryLedger())
