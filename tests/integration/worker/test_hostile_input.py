"""Hostile input against PostgreSQL: source rows it cannot convert, data it refuses, filters over the caps."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from store import ConfigError, Filter, StoreError, StoreUnavailable, VectorRecord
from store.connect.postgres import engine_url
from store.settings import SourceSettings
from store.vectors.backends import memory_store
from tests.backends import unique_name
from tests.unit.worker.pipeline.test_hostile_input import make_jobs
from worker.sources.sql import SqlSource


@pytest.fixture
def hostile_table(postgres_url: str) -> Iterator[str]:
    name = unique_name("hostile")
    engine = sa.create_engine(engine_url(postgres_url))
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE TABLE "{name}" (id integer PRIMARY KEY, body text, amount numeric, due date)'))
        conn.execute(
            sa.text(f"""INSERT INTO "{name}" VALUES (1, 'fine row', 10.5, '2026-11-30'),
            (2, 'numeric infinity', 'Infinity', '2026-11-30'), (3, 'date infinity', 1, 'infinity'),
            (4, 'another fine row', 2, '2026-01-01')""")
        )
    yield name
    with engine.begin() as conn:
        conn.execute(sa.text(f'DROP TABLE "{name}"'))
    engine.dispose()


def test_sql_rows_whose_values_cannot_be_converted_fail_alone(hostile_table: str, postgres_url: str) -> None:
    settings = SourceSettings(
        kind="sql", url=postgres_url, table=hostile_table, text="{body}", metadata=["amount", "due"]
    )
    source = SqlSource(settings)
    jobs = make_jobs(source)
    result = jobs.indexer.index(["1", "2", "3", "4", "99999999999999999999"])
    assert sorted(result.indexed) == ["1", "4"]
    assert set(result.failed) == {"2", "3"}
    assert "metadata of record '2' cannot be encoded as JSON" in result.failed["2"]
    assert "StoreError" in result.failed["3"] and "infinity" in result.failed["3"].lower()
    assert "fix the row in the source, or leave the column out of source.metadata" in result.failed["3"]
    assert result.deleted == ["99999999999999999999"]  # an id the column cannot hold is not in the table
    assert jobs.sweeper.stale(page_size=2) == ["2", "3"]  # a reconcile sweep reports them, and does not crash


def test_data_the_database_refuses_is_not_retried_as_an_outage(postgres_url: str) -> None:
    from store.vectors.pgvector import PgvectorStore

    with PgvectorStore(postgres_url, dimensions=4) as store:
        notes = store.get_collection(unique_name(), create=True)
        import secrets

        huge_id = secrets.token_hex(2000)  # incompressible: over the btree's row size
        with pytest.raises(StoreError) as refused:
            notes.upsert(VectorRecord(huge_id, [1, 0, 0, 0]))
        assert not isinstance(refused.value, StoreUnavailable)
        assert "index row" in str(refused.value)
        too_long = "n" * 47
        with pytest.raises(
            ConfigError,
            match=f"collection name '{too_long}' has 47 characters; with "
            "vectors.table_prefix 'vs_' pgvector takes at most 46",
        ):
            store.get_collection(too_long, create=True)


@pytest.mark.parametrize("kind", ["memory", "pgvector"])
def test_filters_over_the_caps_are_config_errors_not_crashes(kind: str, postgres_url: str) -> None:
    from store.vectors.pgvector import PgvectorStore

    store = memory_store(dimensions=4) if kind == "memory" else PgvectorStore(postgres_url, dimensions=4)
    notes = store.get_collection(unique_name(), create=True)
    notes.upsert(VectorRecord("a", [1, 0, 0, 0], metadata={"kind": "x"}))
    deep: Filter = Filter.eq("kind", "x")
    for _ in range(65):
        deep = Filter.not_(deep)
    with pytest.raises(ConfigError, match=r"nests more than 16 levels: flatten it \(limits.max_filter_depth\)"):
        notes.search([1, 0, 0, 0], filter=deep)
    with pytest.raises(ConfigError, match=r"more than 1000 conditions and values: .*limits.max_filter_terms"):
        notes.count(Filter.any_of("kind", [str(i) for i in range(100_000)]))
    nested_json: dict[str, Any] = {"kind": "x"}
    for _ in range(200):
        nested_json = {"$not": nested_json}
    with pytest.raises(ConfigError, match="nests more than 16 levels of"):
        Filter.from_dict(nested_json)
    store.close()


def test_record_ids_postgresql_cannot_hold_fail_alone_against_its_ledger_and_store(postgres_url: str) -> None:
    """Issue 32, defect 1, on PostgreSQL: a NUL or a lone surrogate in an id reached the ledger's queries and the
    store's write, and failed the whole batch."""
    from store.state.ledger.postgres import PostgresLedger
    from store.vectors.pgvector import PgvectorStore
    from tests.unit.worker.pipeline import test_hostile_input as unit
    from worker.sources.python import PythonSource

    unit.RECORDS.clear()
    unit.RECORDS.update({key: {"id": key, "text": f"note {key!r}"} for key in ["1", *unit.UNSTORABLE_IDS, "2"]})
    ledger = PostgresLedger(postgres_url)
    with PgvectorStore(postgres_url, dimensions=16) as store:
        jobs = make_jobs(PythonSource(loader=f"{unit.__name__}:load_records"), store=store)
        jobs.pipeline.ledger = ledger
        result = jobs.indexer.index(["1", *unit.UNSTORABLE_IDS, "2"])
        assert sorted(result.indexed) == ["1", "2"]
        assert set(result.failed) == set(unit.UNSTORABLE_IDS)
        assert all(unit.ID_RULE_TEXT in error for error in result.failed.values())
        assert jobs.pipeline.collection.count() == 2
    ledger.close()
