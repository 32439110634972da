"""The bench's storage limit (``bench.limit``) on a real pgvector collection: every row copied, every index of
the collection's table built again on the copy, and the copy gone afterwards."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from bench.limit import index_statements, measure
from store.vectors import VectorRecord
from store.vectors.pgvector import PgvectorStore
from tests.backends import unique_name


@pytest.fixture
def collection_table(postgres_url: str) -> str:
    store = PgvectorStore(postgres_url, dimensions=8)
    name = unique_name("limit")
    collection = store.get_collection(name, create=True)
    rng = np.random.default_rng(1)
    collection.upsert_many(
        [
            VectorRecord(f"r{i}:0", rng.standard_normal(8).astype(np.float32), f"text {i}", {"kind": "a"})
            for i in range(50)
        ]
    )
    table = str(collection.table.name)  # type: ignore[attr-defined]
    store.close()
    return table


def test_the_copy_gets_every_row_and_each_index_of_the_collection_table(
    postgres_url: str, collection_table: str
) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        originals = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = %s ORDER BY indexname", (collection_table,)
        ).fetchall()
        statements = index_statements(conn, collection_table, "copy_of_it")
    assert len(statements) == len(originals) >= 5  # primary key, record_id, metadata, HNSW, text_hash, ...
    methods = sorted(definition.split(" USING ", 1)[1] for (definition,) in originals)
    assert sorted(statement.split(" USING ", 1)[1] for statement in statements) == methods
    assert all(' ON "copy_of_it" USING ' in statement for statement in statements)

    limit = measure(postgres_url, collection_table, build_memory_mb=64, build_workers=0)

    assert limit.rows == 50 and limit.copy > 0 and limit.build > 0
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT to_regclass(%s)", (f"{collection_table}_limit",)).fetchone() == (None,)
