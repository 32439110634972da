"""A pgvector collection's rows: the record and chunk columns, bulk loads and their deferred index, the pipeline's swap
(its table: test_schema.py; filtered search: test_planner.py)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import sqlalchemy as sa

from store import VectorRecord
from store.vectors.pgvector import PgvectorStore, PgvectorTuning
from tests.backends import unique_name

DIMENSIONS = 64


@pytest.fixture
def pg(postgres_url: str) -> Iterator[PgvectorStore]:
    store = PgvectorStore(postgres_url, dimensions=DIMENSIONS, metric="cosine", tuning=PgvectorTuning(ef_search=40))
    yield store
    store.close()


def clustered(count: int, *, seed: int = 7) -> np.ndarray:
    """Vectors around 50 centres: uniform random vectors make recall tests meaningless."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((50, DIMENSIONS))
    return centres[rng.integers(0, 50, count)] + 0.3 * rng.standard_normal((count, DIMENSIONS))


def test_record_id_and_chunk_metadata_fill_their_columns(pg: PgvectorStore) -> None:
    collection = pg.get_collection(unique_name(), create=True)
    collection.upsert(VectorRecord("r1:2", np.ones(DIMENSIONS), "t", {"record_id": "r1", "chunk": 2}, model="m1"))
    with pg.transaction() as conn:
        row = conn.execute(
            sa.select(
                collection.table.c.record_id,
                collection.table.c.chunk,  # type: ignore[attr-defined]
                collection.table.c.model,
            )
        ).one()  # type: ignore[attr-defined]
    assert tuple(row) == ("r1", 2, "m1")


def test_a_bulk_load_into_a_non_empty_table_keeps_existing_rows(pg: PgvectorStore) -> None:
    collection = pg.get_collection(unique_name(), create=True)
    vectors = clustered(2_500, seed=1)
    collection.upsert(VectorRecord("first", vectors[0]))
    collection.upsert_many(VectorRecord(f"v{i}", vectors[i]) for i in range(1, 2_500))
    assert collection.count() == 2_500
    collection.upsert_many(VectorRecord(f"v{i}", vectors[i], "again") for i in range(1, 2_500))
    assert collection.count() == 2_500


def test_an_empty_collection_defers_its_index_for_a_bulk_load_and_builds_it_after(pg: PgvectorStore) -> None:
    collection = pg.get_collection(unique_name(), create=True)
    table = collection.table.name  # type: ignore[attr-defined]

    def has_index() -> bool:
        return f"{table}_embedding_idx" in {i["name"] for i in sa.inspect(pg.engine).get_indexes(table)}

    assert collection.defer_index() is True and not has_index()
    vectors = clustered(300, seed=2)
    for start in range(0, 300, 100):  # batches, as reindex tasks write them
        collection.upsert_many(VectorRecord(f"v{i}", vectors[i]) for i in range(start, start + 100))
    assert collection.search(vectors[5], limit=1)[0].id == "v5"  # exact search meanwhile
    collection.ensure_index()
    collection.ensure_index()  # idempotent
    assert has_index() and collection.count() == 300
    assert collection.defer_index() is False and has_index()  # never on a collection with records


def _chunks(record_id: str, texts: list[str], *, seed: int = 1) -> list[VectorRecord]:
    vectors = clustered(len(texts), seed=seed)
    return [
        VectorRecord(f"{record_id}:{n}", vectors[n], text, {"record_id": record_id, "chunk": n})
        for n, text in enumerate(texts)
    ]


def _rows(pg: PgvectorStore, table: str) -> dict[str, tuple[str, str]]:
    with pg.transaction() as conn:
        found = conn.execute(sa.text(f'SELECT id, record_id, text FROM "{table}"')).all()  # test-owned name
    return {r.id: (r.record_id, r.text) for r in found}


def test_the_pipelines_swap_leaves_no_stale_chunk_and_touches_no_other_record(pg: PgvectorStore) -> None:
    collection = pg.get_collection(unique_name(), create=True)
    table = collection.table.name  # type: ignore[attr-defined]
    collection.replace_records(["a", "b"], [*_chunks("a", ["a0", "a1", "a2"]), *_chunks("b", ["b0", "b1"])])
    collection.replace_records(["a"], _chunks("a", ["a0 again"], seed=2))  # three chunks become one
    assert _rows(pg, table) == {"a:0": ("a", "a0 again"), "b:0": ("b", "b0"), "b:1": ("b", "b1")}
    collection.replace_records(["b", "gone"], [])  # no chunks left: the record's rows go
    assert _rows(pg, table) == {"a:0": ("a", "a0 again")}
    assert collection.search(clustered(1, seed=2)[0], limit=1)[0].id == "a:0"


def test_the_pipelines_swap_over_an_id_written_by_hand_for_another_record_replaces_it(pg: PgvectorStore) -> None:
    """A row whose id names another record (written by hand) makes the straight COPY fail: the swap is done
    again as replace_where, which upserts over it, as before."""
    collection = pg.get_collection(unique_name(), create=True)
    table = collection.table.name  # type: ignore[attr-defined]
    collection.upsert(VectorRecord("a:0", clustered(1)[0], "by hand", {"record_id": "other", "chunk": 0}))
    collection.replace_records(["a"], _chunks("a", ["a0", "a1"]))
    assert _rows(pg, table) == {"a:0": ("a", "a0"), "a:1": ("a", "a1")}
