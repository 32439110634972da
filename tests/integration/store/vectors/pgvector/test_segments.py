"""pgvector's keyword segments rank exactly as the SQL path does: after many small writes, replacements and
deletes (dead postings, merges across size classes), under filters, with ties; after an upgrade from a table
without segments; and under concurrent writers (the search over them: test_scoring.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest
import sqlalchemy as sa

from store import Filter, VectorRecord
from store.vectors.pgvector import PgvectorStore, PgvectorTuning, segments
from store.vectors.pgvector.keywords import ranked
from store.vectors.pgvector.table import PgvectorCollection
from tests.backends import keep_keywords, unique_name
from tests.unit.store.vectors.test_keyword_conformance import DIMENSIONS, QUERIES, WordsEmbedder, corpus

#: exact_search_rows=0 in every store here: a filter never takes the planner's exact path, so it meets the segments.
EXACT_NEVER = PgvectorTuning(exact_search_rows=0)
FILTERS = [None, Filter.eq("group", 0), Filter.any_of("group", [1, 2]), Filter.eq("group", 6)]


@pytest.fixture
def pg(postgres_url: str) -> Iterator[PgvectorStore]:
    store = keep_keywords(
        PgvectorStore(postgres_url, dimensions=DIMENSIONS, embedder=WordsEmbedder(), tuning=EXACT_NEVER)
    )
    yield store
    for name in store.list_collections():
        if name.startswith("c_"):
            store.drop_collection(name)
    store.close()


@pytest.fixture
def small_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Size classes of 4, 16, 64 rows...: a few hundred writes cross several classes and merges."""
    monkeypatch.setattr(segments, "BASE_DOCS", 4)


def grouped(records: list[VectorRecord]) -> list[VectorRecord]:
    """``records`` with a ``group`` of 0-6 (6 is rare: a filter keeping few of the best-scored rows)."""
    return [
        VectorRecord(r.id, r.embedding, r.text, {**r.metadata, "record_id": r.id, "group": 6 if i % 50 == 0 else i % 5})
        for i, r in enumerate(records)
    ]


def assert_ranks_as_sql(store: PgvectorStore, collection: PgvectorCollection) -> None:
    """For every query, filter and limit: the same ids in the same order, and the same scores, as the SQL path."""
    for query in QUERIES:
        terms = collection.analyzer.query_terms(query)
        for only in FILTERS:
            for limit in (1, 7, 25):
                found = collection.search(query, limit=limit, filter=only, mode="keyword")
                with store.transaction() as conn:
                    where = collection._where(only)
                    expected = ranked(conn, collection.table, terms, where=where, limit=limit) if terms else []
                assert [m.id for m in found] == [r.id for r in expected or []], (query, only, limit)
                assert np.allclose([m.score for m in found], [r.score for r in expected or []], rtol=1e-12)


def postings(store: PgvectorStore, collection: PgvectorCollection) -> tuple[int, int]:
    """How many segments, and how many (term, kwdoc) postings they hold."""
    segs, posts = segments.posting_tables(collection.table)
    with store.transaction() as conn:
        count = conn.execute(sa.select(sa.func.count()).select_from(segs)).scalar_one()
        held = conn.execute(sa.select(sa.func.sum(posts.c.count))).scalar_one() or 0
    return count, held


def test_segments_rank_as_sql_after_writes_replacements_and_deletes(pg: PgvectorStore, small_classes: None) -> None:
    collection = pg.get_collection(unique_name(), create=True)
    assert isinstance(collection, PgvectorCollection)
    records = grouped(corpus(400))
    for start in range(0, 300, 7):  # 43 small transactions: segments of every class, merged as they fill
        collection.upsert_many(records[start : start + 7])
    assert_ranks_as_sql(pg, collection)
    again = grouped(corpus(400, seed=12))
    collection.upsert_many(again[:150])  # the same ids, new texts: their old postings are dead
    collection.delete_where(Filter.any_of("record_id", [r.metadata["record_id"] for r in records[200:260]]))
    collection.upsert_many(records[300:400])
    assert_ranks_as_sql(pg, collection)


def test_a_merge_drops_the_postings_of_replaced_and_deleted_rows(pg: PgvectorStore, small_classes: None) -> None:
    collection = pg.get_collection(unique_name(), create=True)
    assert isinstance(collection, PgvectorCollection)
    records = grouped(corpus(64))
    for record in records:
        collection.upsert(record)
    _, live = postings(pg, collection)
    for record in records:  # every row written again: its old postings are purged as it is replaced
        collection.upsert(record)
    collection.delete_where(Filter.any_of("record_id", [r.metadata["record_id"] for r in records[:32]]))
    held_by_live = sum(len(collection.analyzer.frequencies(r.text)) for r in records[32:])
    assert postings(pg, collection)[1] == held_by_live < live  # no posting of a replaced or deleted row is left
    with pg.transaction() as conn:
        segments.compact(conn.connection.driver_connection, collection.table)  # type: ignore[arg-type]
    count, held = postings(pg, collection)
    assert (count, held) == (1, held_by_live)
    assert_ranks_as_sql(pg, collection)


def test_a_table_from_before_segments_gains_them_from_its_rows(postgres_url: str) -> None:
    name = unique_name()
    old = keep_keywords(
        PgvectorStore(postgres_url, dimensions=DIMENSIONS, embedder=WordsEmbedder(), tuning=EXACT_NEVER)
    )
    first = old.get_collection(name, create=True)
    assert isinstance(first, PgvectorCollection)
    first.upsert_many(grouped(corpus(300)))
    with old.transaction() as conn:
        for part in segments.posting_tables(first.table):
            conn.execute(sa.text(f'DROP TABLE "{part.name}"'))
        conn.execute(sa.text(f'ALTER TABLE "{first.table.name}" DROP COLUMN kwdoc'))
        conn.execute(sa.text(f'COMMENT ON TABLE "{first.table.name}" IS NULL'))  # made before versions were recorded
    old.close()
    store = keep_keywords(
        PgvectorStore(postgres_url, dimensions=DIMENSIONS, embedder=WordsEmbedder(), tuning=EXACT_NEVER)
    )
    try:
        collection = store.get_collection(name, create=True)
        assert isinstance(collection, PgvectorCollection)
        assert postings(store, collection)[0] == 1
        assert_ranks_as_sql(store, collection)
    finally:
        store.drop_collection(name)
        store.close()


def test_concurrent_writers_of_the_same_rows_leave_segments_that_rank_as_sql(
    pg: PgvectorStore, small_classes: None
) -> None:
    collection = pg.get_collection(unique_name(), create=True)
    assert isinstance(collection, PgvectorCollection)
    versions = [grouped(corpus(120, seed=seed)) for seed in (21, 22, 23, 24)]
    errors: list[BaseException] = []

    def write(records: list[VectorRecord]) -> None:
        try:
            for start in range(0, len(records), 5):
                collection.upsert_many(records[start : start + 5])
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(v,)) for v in versions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert_ranks_as_sql(pg, collection)


def test_the_pipelines_swap_keeps_the_statistics_and_the_postings(pg: PgvectorStore) -> None:
    from store.vectors.pgvector.keywords import statistics

    collection = pg.get_collection(unique_name(), create=True)
    assert isinstance(collection, PgvectorCollection)
    records = grouped(corpus(120, seed=41))
    collection.upsert_many(records)
    again = grouped(corpus(120, seed=42))[:60]
    collection.replace_records([r.id for r in again], again)
    collection.replace_records([r.id for r in records[100:]], [])
    table = collection.table
    terms = sorted({t for r in records + again for t in collection.analyzer.frequencies(r.text)})
    with pg.transaction() as conn:
        n, avgdl, df = statistics(conn, table, terms)
        rows = conn.execute(sa.select(table.c.keywords, table.c.keyword_length)).all()
    held = [row for row in rows if row.keyword_length > 0]
    assert n == len(held) and np.isclose(avgdl, sum(row.keyword_length for row in held) / len(held))
    assert df == {t: c for t in terms if (c := sum(t in row.keywords for row in held))}
    assert_ranks_as_sql(pg, collection)
