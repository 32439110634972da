"""A pgvector collection's table: its columns and indexes, the HNSW parameters of the settings, halfvec above 2000
dimensions, and a table of another metric refused."""

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


@pytest.fixture
def pg(postgres_url: str) -> Iterator[PgvectorStore]:
    store = PgvectorStore(postgres_url, dimensions=64, metric="cosine", tuning=PgvectorTuning(ef_search=40))
    yield store
    store.close()


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
