"""pgvector's keyword statistics and the SQL path: the backfill of a table made before keyword search, another
language analyzing the stored text again, the statistics under concurrent writers and a recount, the planner's
exact path in the keyword leg, and no keyword data for a vector-mode collection."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
import sqlalchemy as sa

from store import Filter, VectorRecord
from store.vectors.pgvector import PgvectorStore
from store.vectors.pgvector.keywords import statistics
from tests.backends import keep_keywords, unique_name
from tests.unit.store.vectors.test_keyword_conformance import (
    DIMENSIONS,
    KEYWORDS_ON,
    QUERIES,
    WordsEmbedder,
    corpus,
    overlap,
    reference_bm25,
)


@pytest.fixture
def pg(postgres_url: str) -> Iterator[PgvectorStore]:
    store = PgvectorStore(postgres_url, dimensions=DIMENSIONS)
    keep_keywords(store)
    yield store
    for name in store.list_collections():
        if name.startswith("c_"):
            store.drop_collection(name)
    store.close()


def _as_before_keyword_search(store: PgvectorStore, name: str) -> None:
    """Make the table look as the release before keyword search left it: no keyword columns, statistics or
    segments, no schema version recorded (pgvector/test_upgrades.py opens the tables that release made)."""
    table = store.schema.table(name).name
    with store.transaction() as conn:
        conn.execute(
            sa.text(f'ALTER TABLE "{table}" DROP COLUMN keywords, DROP COLUMN keyword_length, DROP COLUMN kwdoc')
        )
        conn.execute(sa.text(f'DROP TABLE "{table}_kwstats", "{table}_kwsegs", "{table}_kwpost"'))
        conn.execute(sa.text(f'COMMENT ON TABLE "{table}" IS NULL'))


def test_a_table_from_before_keyword_search_gains_it_from_its_text_without_embedding(postgres_url: str) -> None:
    name, records = unique_name(), corpus()
    old = PgvectorStore(postgres_url, dimensions=DIMENSIONS)
    old.get_collection(name, create=True).upsert_many(records)
    _as_before_keyword_search(old, name)
    old.close()
    embedder = WordsEmbedder()
    store = PgvectorStore(postgres_url, dimensions=DIMENSIONS, embedder=embedder)
    store.configure_search(name, KEYWORDS_ON)
    try:
        collection = store.get_collection(name, create=True)  # opening upgrades it
        assert embedder.calls == 0
        for query in QUERIES[:5]:
            expected = [id for id, _ in reference_bm25(records, query)[:10]]
            found = [m.id for m in store.get_collection(name, create=True).search(query, mode="keyword", limit=10)]
            assert overlap(found, expected) >= 0.9
        assert embedder.calls == 0  # keyword search embeds nothing either
        assert collection.count() == len(records)
    finally:
        store.drop_collection(name)
        store.close()


def test_another_language_analyzes_the_stored_text_again(pg: PgvectorStore) -> None:
    name = unique_name()
    pg.get_collection(name, create=True).upsert(VectorRecord("a", [1.0] * DIMENSIONS, "the configured options"))
    assert pg.get_collection(name, create=True).search(
        "configuring", mode="keyword"
    )  # english: both stem to "configur"
    pg.set_rules(name, language="simple")
    assert pg.get_collection(name, create=True).search("configuring", mode="keyword") == []  # simple: words as they are
    assert [m.id for m in pg.get_collection(name, create=True).search("configured", mode="keyword")] == ["a"]
    assert [m.id for m in pg.get_collection(name, create=True).search("the", mode="keyword")] == ["a"]  # no stop words


def test_statistics_stay_exact_under_concurrent_writers(pg: PgvectorStore) -> None:
    name, records = unique_name(), corpus(200)
    collection = pg.get_collection(name, create=True)
    errors: list[BaseException] = []

    def write(part: int) -> None:
        try:
            mine = records[part::4]
            for start in range(0, len(mine), 10):
                batch = mine[start : start + 10]
                collection.replace_where(Filter.any_of("record_id", [r.id for r in batch]), batch)
                collection.upsert_many(batch)  # the same rows again: replaced, counted once
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(part,)) for part in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    terms = ["merg", "conflict", "git_config"]
    with pg.transaction() as conn:
        n, avgdl, df = statistics(conn, collection.table, terms)  # type: ignore[attr-defined]
        counted = conn.execute(
            sa.text(
                f'SELECT count(*), avg(keyword_length) FROM "{collection.table.name}" '  # type: ignore[attr-defined]
                "WHERE keyword_length > 0"
            )
        ).one()
        for term in terms:
            held = conn.execute(
                sa.text(f'SELECT count(*) FROM "{collection.table.name}" WHERE keywords ? :t'),  # type: ignore[attr-defined]
                {"t": term},
            ).scalar_one()
            assert df.get(term, 0) == held
    assert n == counted[0]
    assert avgdl == pytest.approx(float(counted[1]))


def _racing(write: Callable[[list[VectorRecord]], None], records: list[VectorRecord]) -> None:
    """Two writers of the same records, let go at once."""
    start, errors = threading.Barrier(2), []

    def writer(texts: list[VectorRecord]) -> None:
        try:
            start.wait()
            write(texts)
        except BaseException as exc:  # reported below
            errors.append(exc)

    edited = [VectorRecord(r.id, r.embedding, r.text + " merge conflict", r.metadata) for r in records]
    threads = [threading.Thread(target=writer, args=(mine,)) for mine in (records, edited)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


@pytest.mark.parametrize("path", ["upsert_many", "upsert", "replace_where", "replace_records"])
def test_statistics_equal_a_recount_after_two_writers_of_the_same_new_ids(pg: PgvectorStore, path: str) -> None:
    """Both writers counted +1 for a new id and the second's update was never counted out: after 20 rounds of
    2 writers on 5 ids, 190 documents counted for 100 rows (issue 32, defect 4)."""
    collection, records = pg.get_collection(unique_name(), create=True), corpus(100)
    writes: dict[str, Callable[[list[VectorRecord]], None]] = {
        "upsert_many": collection.upsert_many,
        "upsert": lambda batch: [collection.upsert(r) for r in batch],  # type: ignore[func-returns-value]
        "replace_where": lambda batch: collection.replace_where(Filter.any_of("id", [r.id for r in batch]), batch),
        "replace_records": lambda batch: collection.replace_records([r.id for r in batch], batch),
    }
    for round in range(20):
        _racing(
            writes[path],
            [
                VectorRecord(r.id, r.embedding, r.text, {**r.metadata, "record_id": r.id})
                for r in records[round * 5 : round * 5 + 5]
            ],
        )
    assert collection.count() == 100
    assert collection.recount_keywords() == 0


def test_a_recount_repairs_drifted_statistics(pg: PgvectorStore) -> None:
    collection = pg.get_collection(unique_name(), create=True)
    collection.upsert_many(corpus(30))
    table = collection.table.name  # type: ignore[attr-defined]
    with pg.transaction() as conn:
        conn.execute(sa.text(f"UPDATE \"{table}_kwstats\" SET docs = docs + 7 WHERE term IN ('', 'merg')"))
    assert collection.recount_keywords() == 2
    assert collection.recount_keywords() == 0


def test_a_selective_filter_takes_the_exact_path_in_the_keyword_leg(
    pg: PgvectorStore, caplog: pytest.LogCaptureFixture
) -> None:
    name, records = unique_name(), corpus()
    collection = pg.get_collection(name, create=True)
    collection.upsert_many(records)
    only = Filter.eq("team", 3)
    with caplog.at_level("DEBUG", logger="vectorsync.search"):
        found = collection.search("merge conflict", mode="keyword", filter=only, limit=5)
    assert "exact path" in caplog.text
    assert [m.id for m in found] == [id for id, _ in reference_bm25(records, "merge conflict", only=only)[:5]]


def _keyword_rows(store: PgvectorStore, name: str) -> tuple[int, int, int, int]:
    """Rows with terms, statistics rows, segments and postings of collection ``name``."""
    table = store.schema.table(name).name
    with store.transaction() as conn:
        return tuple(  # type: ignore[return-value]
            conn.execute(sa.text(query)).scalar_one()
            for query in (
                f"SELECT count(*) FROM \"{table}\" WHERE keywords <> '{{}}'::jsonb OR keyword_length <> 0",
                f'SELECT count(*) FROM "{table}_kwstats"',
                f'SELECT count(*) FROM "{table}_kwsegs"',
                f'SELECT count(*) FROM "{table}_kwpost"',
            )
        )


@pytest.mark.parametrize("rows", [300, 2500])  # the COPY of a batch, and a bulk load into an empty table
def test_a_vector_mode_collection_writes_no_keyword_data(postgres_url: str, rows: int) -> None:
    store, name = PgvectorStore(postgres_url, dimensions=DIMENSIONS), unique_name()
    try:
        collection = store.get_collection(name, create=True)
        collection.upsert_many(corpus(rows))
        collection.replace_records([r.id for r in corpus(10)], corpus(10, seed=5))
        collection.delete("d003")
        assert _keyword_rows(store, name) == (0, 0, 0, 0)
        store.set_rules(name, keywords=True)
        assert _keyword_rows(store, name)[0] == collection.total()  # turned on: every row's text analyzed
        assert min(_keyword_rows(store, name)) > 0
        store.set_rules(name, keywords=False)
        assert _keyword_rows(store, name) == (0, 0, 0, 0)  # turned off: terms, statistics and postings dropped
    finally:
        store.drop_collection(name)
        store.close()
