"""pgvector with ``vectors.precision = "half"``: halfvec columns at any size, every path, and tables of the other
precision refused (the setting's validation at load: tests/unit/store/settings/test_vectors.py)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import sqlalchemy as sa

from store import ConfigError, VectorRecord
from store.settings import Settings, VectorSettings
from store.state.generations import Generation
from store.state.generations.base import generation_settings
from store.vectors.backends import open_store
from store.vectors.base import Metric
from store.vectors.filters import Filter
from store.vectors.pgvector import PgvectorStore, PgvectorTuning
from store.vectors.pgvector.schema import embedding_type
from store.vectors.pgvector.table import BULK_LOAD_ROWS
from store.vectors.records import text_digest
from tests.backends import unique_name
from tests.integration.store.vectors.pgvector.test_table import clustered

DIMENSIONS = 64
HALF = PgvectorTuning(precision="half", ef_search=40)
FLOAT = PgvectorTuning(precision="float", ef_search=40)


@pytest.fixture
def half(postgres_url: str) -> Iterator[PgvectorStore]:
    store = PgvectorStore(postgres_url, dimensions=DIMENSIONS, tuning=HALF)
    yield store
    store.close()


def _column_and_index(store: PgvectorStore, table: str) -> tuple[str | None, str]:
    with store.transaction() as conn:
        index = conn.execute(
            sa.text("SELECT indexdef FROM pg_indexes WHERE indexname = :i"), {"i": f"{table}_embedding_idx"}
        ).scalar_one()
        return embedding_type(conn, table), index


@pytest.mark.parametrize(("metric", "ops"), [("cosine", "cosine"), ("dot", "ip"), ("euclidean", "l2")])
def test_a_half_collection_stores_and_indexes_halfvec_for_its_metric(
    postgres_url: str, metric: Metric, ops: str
) -> None:
    with PgvectorStore(postgres_url, dimensions=DIMENSIONS, metric=metric, tuning=HALF) as store:
        collection = store.get_collection(unique_name(), create=True)
        column, index = _column_and_index(store, collection.table.name)  # type: ignore[attr-defined]
        assert column == f"halfvec({DIMENSIONS})"
        assert f"USING hnsw (embedding halfvec_{ops}_ops)" in index
        store.drop_collection(collection.name)


def test_a_half_collection_round_trips_upsert_search_delete_and_reads(half: PgvectorStore) -> None:
    collection = half.get_collection(unique_name(), create=True)
    vectors = clustered(40, seed=3)
    collection.upsert_many(
        VectorRecord(f"r{i}:0", vectors[i], f"text {i}", {"record_id": f"r{i}", "chunk": 0, "n": i}, model="m")
        for i in range(40)
    )
    assert collection.count() == 40
    [top] = collection.search(vectors[7], limit=1)
    assert (top.id, top.text, top.metadata["n"]) == ("r7:0", "text 7", 7)
    assert top.score == pytest.approx(1.0, abs=1e-3)
    assert [m.id for m in collection.search(vectors[7], filter=Filter.gte("n", 39), limit=5)] == ["r39:0"]
    collection.delete("r7:0")
    collection.delete_where(Filter.lt("n", 5))
    assert collection.count() == 34
    assert "r7:0" not in {m.id for m in collection.search(vectors[7], limit=10)}
    stored = collection.vectors_by_hash([text_digest("text 8")], model="m")  # read back as floats: reuse
    assert np.allclose(stored[text_digest("text 8")], vectors[8], atol=2e-3)  # float16 keeps ~3 decimal digits
    [digest] = collection.chunk_digests(["r8"])  # verify reads the vector's size from the halfvec
    assert (digest.id, digest.dimensions, digest.text_hash) == ("r8:0", DIMENSIONS, text_digest("text 8"))


def test_a_half_collection_takes_the_bulk_copy_and_the_pipelines_swap(half: PgvectorStore) -> None:
    collection = half.get_collection(unique_name(), create=True)
    table = collection.table.name  # type: ignore[attr-defined]
    vectors = clustered(BULK_LOAD_ROWS + 100, seed=4)
    collection.upsert_many(VectorRecord(f"v{i}", vectors[i]) for i in range(len(vectors)))  # load, then index
    assert collection.count() == len(vectors)
    assert _column_and_index(half, table)[0] == f"halfvec({DIMENSIONS})"
    assert collection.search(vectors[11], limit=1)[0].id == "v11"
    swapped = [VectorRecord(f"a:{n}", vectors[n], f"a{n}", {"record_id": "a", "chunk": n}) for n in range(3)]
    collection.replace_records(["a"], swapped)  # straight binary COPY into the indexed table
    collection.replace_records(["a"], swapped[:1])
    assert collection.count(Filter.eq("record_id", "a")) == 1
    assert collection.search(vectors[0], filter=Filter.eq("record_id", "a"), limit=3)[0].id == "a:0"


def _recall(store: PgvectorStore, data: np.ndarray, queries: np.ndarray) -> float:
    collection = store.get_collection(unique_name(), create=True)
    collection.upsert_many(VectorRecord(f"v{i}", data[i]) for i in range(len(data)))
    unit = data / np.linalg.norm(data, axis=1, keepdims=True)
    found = 0
    for query in queries:
        truth = {f"v{i}" for i in np.argsort(-(unit @ query))[:10]}
        found += len(truth & {m.id for m in collection.search(query, limit=10)})
    store.drop_collection(collection.name)
    return found / (10 * len(queries))


def test_half_precision_recall_is_close_to_float(postgres_url: str) -> None:
    data, queries = clustered(4_000, seed=5), clustered(50, seed=6)
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    # ef_search 1000: at the default 200 both graphs' recall was about 0.7 on these tight clusters, and two
    # builds of the same rows differed by more than 0.03 by chance (0.702 against 0.736 in one CI run)
    wide = {"ef_search": 1000}
    with (
        PgvectorStore(
            postgres_url, dimensions=DIMENSIONS, tuning=PgvectorTuning(precision="float", **wide)
        ) as as_float,
        PgvectorStore(postgres_url, dimensions=DIMENSIONS, tuning=PgvectorTuning(precision="half", **wide)) as as_half,
    ):
        float_recall, half_recall = _recall(as_float, data, queries), _recall(as_half, data, queries)
    assert float_recall > 0.5  # the index is searched, not bypassed
    assert half_recall >= float_recall - 0.03, (half_recall, float_recall)


@pytest.mark.parametrize(("made", "opened", "found"), [("float", "half", "vector"), ("half", "float", "halfvec")])
def test_a_table_of_the_other_precision_is_refused_and_kept(
    postgres_url: str, made: str, opened: str, found: str
) -> None:
    name = unique_name()
    maker = PgvectorStore(postgres_url, dimensions=DIMENSIONS, tuning=PgvectorTuning(precision=made))  # type: ignore[arg-type]
    opener = PgvectorStore(postgres_url, dimensions=DIMENSIONS, tuning=PgvectorTuning(precision=opened))  # type: ignore[arg-type]
    try:
        maker.get_collection(name, create=True).upsert(VectorRecord("kept", clustered(1)[0]))
        wanted = "halfvec" if opened == "half" else "vector"
        message = (
            f"table 'vs_{name}' of collection '{name}' holds embeddings of type {found}({DIMENSIONS}); settings say "
            f'{wanted}({DIMENSIONS}) (vectors.precision = "{opened}"): set vectors.precision = "{made}" to use the '
            "table as it is, or drop the table or use another collection name and reindex"
        )
        with pytest.raises(ConfigError) as error:
            opener.get_collection(name, create=True)
        assert str(error.value) == message
        assert [m.id for m in maker.get_collection(name).search(clustered(1)[0], limit=5)] == ["kept"]
    finally:
        maker.drop_collection(name)
        maker.close()
        opener.close()


def test_another_size_is_still_refused_as_a_size(postgres_url: str) -> None:
    name = unique_name()
    with (
        PgvectorStore(postgres_url, dimensions=8, tuning=HALF) as small,
        PgvectorStore(postgres_url, dimensions=16, tuning=HALF) as large,
    ):
        small.get_collection(name, create=True)
        with pytest.raises(ConfigError, match=r"type halfvec\(8\); settings say halfvec\(16\) \(vectors.dimensions\)"):
            large.get_collection(name, create=True)
        small.drop_collection(name)


def test_above_2000_dimensions_float_precision_opens_the_halfvec_table(postgres_url: str) -> None:
    name = unique_name()
    with (
        PgvectorStore(postgres_url, dimensions=2048, tuning=HALF) as as_half,
        PgvectorStore(postgres_url, dimensions=2048, tuning=FLOAT) as as_float,
    ):
        as_half.get_collection(name, create=True)
        collection = as_float.get_collection(name, create=True)  # halfvec is forced there: the same table
        assert _column_and_index(as_float, collection.table.name)[0] == "halfvec(2048)"  # type: ignore[attr-defined]
        as_float.drop_collection(name)


def test_a_model_migrations_generation_is_made_at_the_settings_precision(postgres_url: str) -> None:
    vectors = VectorSettings(url=postgres_url, dimensions=8, precision="half")
    settings = Settings(vectors=vectors)
    model = {"provider": "fake", "model": "words", "dimensions": 12}
    generation = Generation(unique_name(), 2, ("large",), {"large": model}, 12)
    with open_store(generation_settings(settings, generation)) as store:
        collection = store.get_collection(generation.physical, create=True)
        collection.upsert(VectorRecord("g", np.ones(12)))
        assert _column_and_index(store, collection.table.name)[0] == "halfvec(12)"  # type: ignore[attr-defined]
        assert collection.search(np.ones(12), limit=1)[0].id == "g"
        store.drop_collection(generation.physical)
