"""Filtered search on pgvector: index-usable filters, the exact-or-HNSW planner on real tables, declared indexed
fields on pgvector and on a Qdrant server (the choice itself, and Qdrant's local mode: tests/unit)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import numpy as np
import pytest
import sqlalchemy as sa
from psycopg.types.json import Jsonb

from store import ConfigError, Filter, VectorRecord
from store.vectors.backends import memory_store
from store.vectors.pgvector import PgvectorStore, PgvectorTuning
from store.vectors.pgvector.schema import field_index_name
from store.vectors.pgvector.table import PgvectorCollection
from tests.backends import unique_name
from tests.unit.store.vectors.test_indexed import DIMENSIONS

ROWS = 3_000


@pytest.fixture
def pg(postgres_url: str) -> Iterator[PgvectorStore]:
    store = PgvectorStore(postgres_url, dimensions=DIMENSIONS, tuning=PgvectorTuning(ef_search=400))
    yield store
    store.close()


def clustered(count: int, *, seed: int = 11) -> np.ndarray:
    """Vectors around 20 centres: uniform random vectors make recall meaningless."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((20, DIMENSIONS))
    return centres[rng.integers(0, 20, count)] + 0.3 * rng.standard_normal((count, DIMENSIONS))


def _records(vectors: np.ndarray) -> list[VectorRecord]:
    return [
        VectorRecord(f"v{i}", vectors[i], "", {"bucket": i % 100, "tens": i % 10, "tags": [f"t{i % 7}"]})
        for i in range(len(vectors))
    ]


@pytest.fixture
def loaded(pg: PgvectorStore) -> tuple[PgvectorCollection, np.ndarray, list[VectorRecord]]:
    vectors = clustered(ROWS + 20)
    records = _records(vectors[:ROWS])
    collection = pg.get_collection(unique_name(), create=True)
    collection.upsert_many(records)
    assert isinstance(collection, PgvectorCollection)
    return collection, vectors[ROWS:], records


def _plans(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage().rsplit(": ", 1)[-1] for r in caplog.records if r.name == "vectorsync.search"]


FILTERS = [
    Filter.eq("bucket", 7),  # 1%
    Filter.any_of("bucket", [1, 2, 3]),  # 3%
    Filter.eq("tens", 4),  # 10%
    Filter.eq("tags", "t3") & ~Filter.eq("tens", 0),  # a list field, negated part
    Filter.eq("tens", 1) | Filter.eq("bucket", 52),
]


@pytest.mark.parametrize("filter", FILTERS, ids=["eq", "any_of", "tenth", "list-and-not", "or"])
def test_exact_and_hnsw_paths_return_the_same_ids(
    loaded: tuple[PgvectorCollection, np.ndarray, list[VectorRecord]],
    pg: PgvectorStore,
    filter: Filter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    collection, queries, records = loaded
    memory = memory_store(dimensions=DIMENSIONS).get_collection("truth", create=True)
    memory.upsert_many(records)
    caplog.set_level(logging.DEBUG, logger="vectorsync.search")
    for query in queries[:5]:
        pg.exact_search_rows = ROWS  # every filter here matches fewer rows: sorted exactly
        exact = [m.id for m in collection.search(query, filter=filter, limit=10)]
        pg.exact_search_rows = 0  # never exact: the HNSW index with iterative scans
        approximate = [m.id for m in collection.search(query, filter=filter, limit=10)]
        truth = [m.id for m in memory.search(query, filter=filter, limit=10)]
        assert exact == truth
        assert approximate == truth
    assert _plans(caplog) == ["exact path"] * 5


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "vectorsync.search"]


def test_the_plan_follows_a_sampled_estimate_of_the_matching_rows(
    loaded: tuple[PgvectorCollection, np.ndarray, list[VectorRecord]],
    pg: PgvectorStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    collection, queries, _ = loaded  # a bulk load: analyzed, so the catalog knows its 3,000 rows
    pg.exact_search_rows = 100
    caplog.set_level(logging.DEBUG, logger="vectorsync.search")
    few = collection.search(queries[0], filter=Filter.eq("bucket", 3), limit=5)  # 30 rows
    many = collection.search(queries[0], filter=Filter.eq("tens", 3), limit=5)  # 300 rows
    assert [m.metadata["bucket"] for m in few] == [3] * 5
    assert [m.metadata["tens"] for m in many] == [3] * 5
    messages = _messages(caplog)
    assert messages[0].endswith("(sample; bound 100): exact path"), messages
    assert messages[1].endswith("(sample; bound 100): hnsw path"), messages
    pg.exact_search_rows = 5_000
    collection.search(queries[0], filter=Filter.eq("tens", 3), limit=5)  # 300 rows: always cheap to sort
    assert _messages(caplog)[-1].endswith("(sample; bound 5000): exact path")


def test_a_table_never_analyzed_is_counted_up_to_the_bound(pg: PgvectorStore, caplog: pytest.LogCaptureFixture) -> None:
    vectors = clustered(600)
    collection = pg.get_collection(unique_name(), create=True)
    for start in range(0, 600, 200):  # small writes: no bulk load, no ANALYZE
        collection.upsert_many(_records(vectors)[start : start + 200])
    pg.exact_search_rows = 100
    caplog.set_level(logging.DEBUG, logger="vectorsync.search")
    collection.search(vectors[0], filter=Filter.eq("bucket", 3), limit=5)  # 6 rows
    collection.search(vectors[0], filter=Filter.eq("tens", 3), limit=5)  # 60 rows
    collection.search(vectors[0], filter=Filter.eq("tags", "t3"), limit=5)  # 86 rows
    collection.search(vectors[0], filter=Filter.any_of("tens", [1, 2]), limit=5)  # 120 rows
    assert [m.rsplit("(", 1)[-1] for m in _messages(caplog)] == [
        "count; bound 100): exact path",
        "count; bound 100): exact path",
        "count; bound 100): exact path",
        "count; bound 100): hnsw path",
    ]
    with pg.transaction() as conn:
        conn.execute(sa.text(f"ANALYZE {collection.table.name}"))  # type: ignore[attr-defined]
    pg.exact_search_rows = 1_000
    collection.search(vectors[0], filter=Filter.any_of("tens", [1, 2]), limit=5)
    assert _messages(caplog)[-1].endswith("about 600 rows (table; bound 1000): exact path")


def test_an_estimate_that_was_too_low_hands_over_to_hnsw(
    loaded: tuple[PgvectorCollection, np.ndarray, list[VectorRecord]],
    pg: PgvectorStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    collection, queries, _ = loaded
    pg.exact_search_rows = 100
    with pg.transaction() as conn:  # the catalog says 50 rows: the planner will try the exact path
        conn.execute(
            sa.text("UPDATE pg_class SET reltuples = 50 WHERE oid = to_regclass(:t)"), {"t": collection.table.name}
        )
    caplog.set_level(logging.DEBUG, logger="vectorsync.search")
    found = collection.search(queries[0], filter=Filter.any_of("tens", [3, 4]), limit=5)  # 600 rows > 3 x 100
    assert {m.metadata["tens"] for m in found} <= {3, 4} and len(found) == 5
    assert _messages(caplog)[-1].endswith("about 301 rows (overshoot; bound 100): hnsw path"), _messages(caplog)


def test_the_plan_is_counted_in_a_metric(loaded: tuple[PgvectorCollection, np.ndarray, list[VectorRecord]]) -> None:
    from prometheus_client import REGISTRY

    collection, queries, _ = loaded
    labels = {"collection": collection.name, "plan": "exact"}
    before = REGISTRY.get_sample_value("vectorsync_search_plans_total", labels) or 0.0
    collection.search(queries[0], filter=Filter.eq("bucket", 9), limit=3)
    assert REGISTRY.get_sample_value("vectorsync_search_plans_total", labels) == before + 1


def _explain(pg: PgvectorStore, collection: PgvectorCollection, filter: Filter) -> str:
    """PostgreSQL's plan for selecting the rows ``filter`` matches, with sequential scans off: can an index serve it?"""
    statement = sa.select(collection.table.c.id).where(collection._where(filter))
    with pg.transaction() as conn:
        conn.execute(sa.text("SET LOCAL enable_seqscan = off"))
        compiled = statement.compile(dialect=conn.dialect)
        params = {k: Jsonb(v) if isinstance(v, dict | list) else v for k, v in compiled.params.items()}
        return "\n".join(row[0] for row in conn.exec_driver_sql("EXPLAIN " + str(compiled), params).all())


def test_equality_filters_are_served_by_the_gin_index(
    loaded: tuple[PgvectorCollection, np.ndarray, list[VectorRecord]],
    pg: PgvectorStore,
) -> None:
    collection, _, _ = loaded
    gin = f"{collection.table.name}_metadata_idx"
    for filter in (
        Filter.eq("bucket", 7),
        Filter.any_of("bucket", [1, 2]),
        Filter.eq("tags", "t1") & Filter.eq("tens", 2),
    ):
        assert gin in _explain(pg, collection, filter), filter


def test_declared_fields_get_btree_indexes_that_serve_ranges(pg: PgvectorStore) -> None:
    name = unique_name()
    pg.indexed[name] = {"owner_id": "integer", "created_at": "datetime", "owner.kind": "keyword"}
    collection = pg.get_collection(name, create=True)
    assert isinstance(collection, PgvectorCollection)
    table = collection.table.name
    with pg.transaction() as conn:
        query = sa.text("SELECT indexname FROM pg_indexes WHERE tablename = :t")
        found = set(conn.execute(query, {"t": table}).scalars())
    assert {field_index_name(table, f) for f in ("owner_id", "created_at", "owner.kind")} <= found

    collection.upsert_many(
        [
            VectorRecord(
                f"r{i}",
                [1.0] * DIMENSIONS,
                "",
                {"owner_id": i, "created_at": f"2026-11-{1 + i % 28:02d}T00:00:00+00:00", "owner": {"kind": "team"}},
            )
            for i in range(200)
        ]
    )
    assert collection.count(Filter.gte("owner_id", 150)) == 50
    assert collection.count(Filter.lt("created_at", "2026-11-02")) == len([i for i in range(200) if i % 28 == 0])
    assert field_index_name(table, "owner_id") in _explain(pg, collection, Filter.gt("owner_id", 10))


def test_a_field_declared_later_is_indexed_on_the_existing_collection(pg: PgvectorStore) -> None:
    name = unique_name()
    collection = pg.get_collection(name, create=True)
    collection.upsert_many([VectorRecord("a", [1.0] * DIMENSIONS, "", {"n": 1})])
    collection.declare_indexes({"n": "integer"})
    with pg.transaction() as conn:
        found = set(
            conn.execute(
                sa.text("SELECT indexname FROM pg_indexes WHERE tablename = :t"), {"t": collection.table.name}
            ).scalars()
        )  # type: ignore[attr-defined]
    assert field_index_name(collection.table.name, "n") in found  # type: ignore[attr-defined]
    assert collection.count(Filter.gt("n", 0)) == 1


@pytest.mark.parametrize("store_kind", ["memory", "pgvector"])
def test_a_value_of_another_type_than_declared_is_refused_naming_it(store_kind: str, postgres_url: str) -> None:
    store = (
        memory_store(dimensions=DIMENSIONS)
        if store_kind == "memory"
        else PgvectorStore(postgres_url, dimensions=DIMENSIONS)
    )
    name = unique_name()
    store.indexed[name] = {"owner_id": "integer"}
    collection = store.get_collection(name, create=True)
    collection.upsert_many([VectorRecord("kept", [1.0] * DIMENSIONS, "", {"owner_id": 1})])
    with pytest.raises(ConfigError, match=r"record 'bad': metadata field 'owner_id' = '7' is not a single integer"):
        collection.upsert_many(
            [
                VectorRecord("fine", [1.0] * DIMENSIONS, "", {"owner_id": 2}),
                VectorRecord("bad", [1.0] * DIMENSIONS, "", {"owner_id": "7"}),
            ]
        )
    assert collection.count() == 1  # nothing of the refused batch was written, nothing stored was lost
    store.close()


@pytest.mark.skipif(not os.environ.get("VECTORSYNC_TEST_QDRANT_URL"), reason="VECTORSYNC_TEST_QDRANT_URL is not set")
def test_a_qdrant_server_holds_the_payload_indexes_of_the_declared_fields() -> None:
    from qdrant_client import models

    from store.vectors.qdrant import QdrantStore

    store = QdrantStore(os.environ["VECTORSYNC_TEST_QDRANT_URL"], dimensions=DIMENSIONS)
    name = unique_name()
    store.indexed[name] = {"owner_id": "integer", "created_at": "datetime"}
    store.get_collection(name, create=True)
    schema = store._client.get_collection(name).payload_schema
    assert schema["metadata.owner_id"].data_type == models.PayloadSchemaType.INTEGER
    assert schema["metadata.created_at"].data_type == models.PayloadSchemaType.DATETIME
    store.drop_collection(name)
    store.close()
