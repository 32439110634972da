"""pgvector specifics: schema, halfvec, bulk loads (filtered search: test_search_planner.py)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import sqlalchemy as sa

from store import ConfigError, VectorRecord
from store.settings import VectorSettings
from store.vectors.pgvector import PgvectorStore, PgvectorTuning
from store.vectors.pgvector.schema import embedding_type
from store.vectors.pgvector.table import BULK_LOAD_ROWS
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


def test_schema_has_the_documented_columns_and_indexes(pg: PgvectorStore) -> None:
    collection = pg.get_collection(unique_name(), create=True)
    inspector = sa.inspect(pg.engine)
    table = collection.table.name  # type: ignore[attr-defined]
    columns = {c["name"] for c in inspector.get_columns(table)}
    assert columns == {
        "id",
        "record_id",
        "chunk",
        "embedding",
        "text",
        "metadata",
        "model",
        "updated_at",
        "keywords",
        "keyword_length",
        "kwdoc",
        "text_hash",
    }
    with pg.transaction() as conn:
        indexes = dict(
            conn.execute(sa.text("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = :t"), {"t": table}).all()
        )
    definitions = " ".join(indexes.values())
    assert "USING hnsw (embedding vector_cosine_ops)" in definitions
    assert "USING gin (metadata jsonb_path_ops)" in definitions
    assert "USING btree (record_id)" in definitions
    assert "USING gin (keywords)" in definitions
    assert "UNIQUE INDEX" in indexes[f"{table}_kwdoc_idx"]
    assert "USING btree (model, text_hash)" in indexes[f"{table}_text_hash_idx"]


def test_the_hnsw_index_is_built_with_the_settings_parameters(postgres_url: str) -> None:
    defaults = VectorSettings()
    for store in (
        PgvectorStore(postgres_url, dimensions=4),
        PgvectorStore(postgres_url, dimensions=4, tuning=PgvectorTuning(hnsw_m=8, hnsw_ef_construction=40)),
    ):
        m, ef_construction = store.schema.hnsw_m, store.schema.hnsw_ef_construction
        collection = store.get_collection(unique_name(), create=True)
        collection.upsert_many(VectorRecord(f"v{i}", [1.0, i, 0.0, 1.0]) for i in range(BULK_LOAD_ROWS))  # built after
        with store.transaction() as conn:
            definition = conn.execute(
                sa.text("SELECT indexdef FROM pg_indexes WHERE indexname = :i"),
                {"i": f"{collection.table.name}_embedding_idx"},
            ).scalar_one()  # type: ignore[attr-defined]
        assert f"WITH (m='{m}', ef_construction='{ef_construction}')" in definition
        store.drop_collection(collection.name)
        store.close()
    assert (defaults.hnsw_m, defaults.hnsw_ef_construction) == (16, 128)  # docs/benchmarks.md, "HNSW defaults"


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


def test_above_2000_dimensions_the_column_is_halfvec(postgres_url: str) -> None:
    store = PgvectorStore(postgres_url, dimensions=3072)
    try:
        collection = store.get_collection(unique_name(), create=True)
        vector = np.zeros(3072)
        vector[0] = 1.0
        collection.upsert(VectorRecord("big", vector))
        [match] = collection.search(vector)
        assert match.score == pytest.approx(1.0, abs=1e-3)
        with store.transaction() as conn:
            kind = embedding_type(conn, collection.table.name)  # type: ignore[attr-defined]
        assert kind == "halfvec(3072)"
    finally:
        store.close()


def test_more_dimensions_than_pgvector_can_index_is_a_config_error(postgres_url: str) -> None:
    with pytest.raises(ConfigError, match="vectors.dimensions = 5000 is more than pgvector can index"):
        PgvectorStore(postgres_url, dimensions=5000)


def test_a_bulk_load_into_a_non_empty_table_keeps_existing_rows(pg: PgvectorStore) -> None:
    collection = pg.get_collection(unique_name(), create=True)
    vectors = clustered(2_500, seed=1)
    collection.upsert(VectorRecord("first", vectors[0]))
    collection.upsert_many(VectorRecord(f"v{i}", vectors[i]) for i in range(1, 2_500))
    assert collection.count() == 2_500
    collection.upsert_many(VectorRecord(f"v{i}", vectors[i], "again") for i in range(1, 2_500))
    assert collection.count() == 2_500


def test_unreachable_database_is_store_unavailable_without_the_password() -> None:
    from store import StoreUnavailable

    with pytest.raises(StoreUnavailable) as error:
        PgvectorStore("postgresql://app:s3cret@127.0.0.1:1/nowhere", dimensions=4)
    assert "s3cret" not in str(error.value)
    assert "127.0.0.1:1" in str(error.value)


def test_an_existing_table_indexed_for_another_metric_is_refused(postgres_url: str) -> None:
    name = unique_name()
    first = PgvectorStore(postgres_url, dimensions=4, metric="cosine")
    first.get_collection(name, create=True)
    second = PgvectorStore(postgres_url, dimensions=4, metric="euclidean")
    with pytest.raises(ConfigError, match=f"collection '{name}' is indexed for cosine; settings say euclidean"):
        second.get_collection(name, create=True)
    first.drop_collection(name)
    first.close()
    second.close()


def test_a_malformed_database_url_is_a_config_error_without_the_password() -> None:
    with pytest.raises(ConfigError, match="vectors.url = .* is not a usable database URL") as error:
        PgvectorStore("postgresql://app:s3cret@db:notaport/x", dimensions=4)
    assert "s3cret" not in str(error.value)


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
