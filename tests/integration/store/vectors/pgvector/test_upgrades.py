"""Upgrading collection tables: dumps of tables older vectorsyncs made, with rows (``fixtures/``,
``collection_dumps.py``), opened by this one: every row intact, the shape that of a table made now, the version
recorded; once, whatever the number of processes opening it at once."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from store.connect.postgres import engine_url
from store.errors import SchemaTooNew
from store.settings import SearchSettings
from store.vectors.keyword import analyzer
from store.vectors.pgvector import PgvectorStore, segments
from store.vectors.pgvector.keywords import ranked
from store.vectors.pgvector.table import PgvectorCollection
from store.vectors.pgvector.upgrades import CURRENT_VERSION, record_version, recorded_version
from store.vectors.records import text_digest
from tests.integration.collection_dumps import COLLECTION, DIMENSIONS, FIXTURES, TABLE, records
from tests.integration.state_db import execute, fresh_database

#: Each dump and the schema version its table is at (its header names the commit that made it).
DUMPS = [("v1", 1), ("v2", 2), ("main", 3)]
#: The columns every version has, in the rows as written.
_ROWS = f"SELECT id, record_id, chunk, embedding::text, text, metadata, model, updated_at FROM {TABLE} ORDER BY id"


@pytest.fixture
def database(postgres_url: str) -> Iterator[str]:
    with fresh_database(postgres_url) as url:
        execute(url, "CREATE EXTENSION vector")
        yield url


def load(url: str, dump: str) -> None:
    """Create the collection's tables and rows as ``fixtures/pgvector_collection_<dump>.sql`` has them."""
    engine = sa.create_engine(engine_url(url), poolclass=sa.NullPool)
    try:
        with engine.begin() as conn:  # a script of many statements, sent as one (no parameters)
            conn.connection.driver_connection.execute(  # type: ignore[union-attr]
                (FIXTURES / f"pgvector_collection_{dump}.sql").read_text()
            )
    finally:
        engine.dispose()


def open_collection(url: str, *, keywords: bool = True) -> tuple[PgvectorStore, PgvectorCollection]:
    """The dump's collection and ``fresh`` opened as a collection searched by keyword (``keywords``) or not."""
    store = PgvectorStore(url, dimensions=DIMENSIONS)
    for name in (COLLECTION, "fresh"):
        store.configure_search(name, SearchSettings(keywords=keywords))
    collection = store.get_collection(COLLECTION, create=True)
    assert isinstance(collection, PgvectorCollection)
    return store, collection


def version(url: str, table: str = TABLE) -> int | None:
    engine = sa.create_engine(engine_url(url), poolclass=sa.NullPool)
    try:
        with engine.connect() as conn:
            return recorded_version(conn, table)
    finally:
        engine.dispose()


def shape(url: str, table: str) -> dict[str, set[tuple[Any, ...]]]:
    """The tables of a collection as the catalog tells them, named as ``TABLE``'s; HNSW parameters left out
    (the defaults changed; a table keeps the ones it was built with)."""
    like = {"t": table}
    queries = {
        "columns": "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attidentity, "
        "pg_get_expr(d.adbin, d.adrelid), col_description(c.oid, a.attnum) FROM pg_attribute a "
        "JOIN pg_class c ON c.oid = a.attrelid LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid "
        "AND d.adnum = a.attnum WHERE c.relkind = 'r' AND starts_with(c.relname, :t) AND a.attnum > 0 "
        "AND NOT a.attisdropped",
        "constraints": "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE starts_with(conrelid::regclass::text, :t)",
        "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE starts_with(tablename, :t)",
        "tables": "SELECT relname, obj_description(oid, 'pg_class') FROM pg_class WHERE relkind = 'r' "
        "AND starts_with(relname, :t)",
    }
    found = {what: {tuple(row) for row in execute(url, query, like)} for what, query in queries.items()}

    def named(value: Any) -> Any:
        return (
            re.sub(r" WITH \(m='\d+', ef_construction='\d+'\)", "", value.replace(table, TABLE))
            if isinstance(value, str)
            else value
        )

    return {what: {tuple(named(v) for v in row) for row in rows} for what, rows in found.items()}


def as_written() -> list[tuple[Any, ...]]:
    """``records()`` as rows of ``_ROWS`` (updated_at left out)."""
    rows = [
        (
            r["id"],
            r["metadata"].get("record_id"),
            r["metadata"].get("chunk"),
            r["embedding"],
            r["text"],
            r["metadata"],
            r["model"],
        )
        for r in records()
    ]
    return sorted(rows, key=lambda row: row[0])


def read_back(rows: list[Any]) -> list[tuple[Any, ...]]:
    return [(r.id, r.record_id, r.chunk, json.loads(r.embedding), r.text, r.metadata, r.model) for r in rows]


@pytest.mark.parametrize(("dump", "made_at"), DUMPS)
def test_an_older_table_keeps_every_row_and_ends_as_a_table_made_now(database: str, dump: str, made_at: int) -> None:
    load(database, dump)
    before = execute(database, _ROWS)
    assert read_back(before) == as_written()  # the dump holds what the test expects
    assert version(database) is None  # made before versions were recorded
    store, collection = open_collection(database)
    try:
        store.get_collection("fresh", create=True)
        assert execute(database, _ROWS) == before  # ids, texts, metadata, embeddings, models, times
        assert version(database) == version(database, "vs_fresh") == CURRENT_VERSION
        assert shape(database, TABLE) == shape(database, "vs_fresh")
        assert_keyword_search_reads_every_row(store, collection)
    finally:
        store.close()


def assert_keyword_search_reads_every_row(store: PgvectorStore, collection: PgvectorCollection) -> None:
    """Every row's terms by today's analyzer, statistics as a recount makes them, one segment that ranks as SQL."""
    terms_of = analyzer("english").frequencies
    with store.transaction() as conn:
        rows = conn.execute(
            sa.select(collection.table.c.text, collection.table.c.keywords, collection.table.c.keyword_length)
        ).all()
    assert [(dict(kw), n) for _, kw, n in rows] == [(dict(terms_of(t)), sum(terms_of(t).values())) for t, _, _ in rows]
    assert collection.recount_keywords() == 0
    _, posts = segments.posting_tables(collection.table)
    with store.transaction() as conn:
        held = conn.execute(sa.select(sa.func.sum(posts.c.count))).scalar_one()
    assert held == sum(len(kw) for _, kw, _ in rows)
    for query in ("worker pool", "index settings", "café quotes", "line"):
        found = collection.search(query, mode="keyword", limit=30)
        with store.transaction() as conn:
            expected = (
                ranked(conn, collection.table, collection.analyzer.query_terms(query), where=sa.true(), limit=30) or []
            )
        assert found and [m.id for m in found] == [r.id for r in expected]
        assert np.allclose([m.score for m in found], [r.score for r in expected], rtol=1e-12)


@pytest.mark.parametrize("dump", [dump for dump, _ in DUMPS])
def test_an_older_table_opened_without_keyword_search_keeps_its_rows_and_drops_its_terms(
    database: str, dump: str
) -> None:
    load(database, dump)
    before = execute(database, _ROWS)
    store, collection = open_collection(database, keywords=False)
    try:
        store.get_collection("fresh", create=True)
        assert execute(database, _ROWS) == before
        assert version(database) == CURRENT_VERSION
        assert shape(database, TABLE) == shape(database, "vs_fresh")
        with store.transaction() as conn:
            kept = conn.execute(sa.select(sa.func.count()).where(collection.table.c.keyword_length > 0)).scalar_one()
        assert kept == 0
        store.set_rules(COLLECTION, keywords=True)  # turned on: made from the stored text
        assert_keyword_search_reads_every_row(store, store.get_collection(COLLECTION))  # type: ignore[arg-type]
    finally:
        store.close()


@pytest.mark.parametrize("dump", [dump for dump, _ in DUMPS])
def test_an_upgraded_table_finds_each_rows_vector_by_its_texts_hash(database: str, dump: str) -> None:
    """Step 4 fills every row's text hash in place: the vectors a model stored for a text are found by it."""
    load(database, dump)
    store, collection = open_collection(database)
    try:
        hashed = execute(database, f"SELECT text, encode(text_hash, 'hex') FROM {TABLE}")
        assert len(hashed) == len(records()) and all(h == text_digest(t) for t, h in hashed)
        for model in {r["model"] for r in records()}:
            held: dict[str, list[list[float]]] = {}
            for r in records():
                if r["model"] == model:
                    held.setdefault(text_digest(r["text"]), []).append(r["embedding"])
            found = collection.vectors_by_hash([*held, text_digest("never stored")], model=model)
            assert set(found) == set(held)
            assert all(vector in held[h] for h, vector in found.items())  # one of the rows holding that text
    finally:
        store.close()


def test_the_first_tables_gin_pending_list_is_turned_off(database: str) -> None:
    load(database, "v1")
    options = f"SELECT reloptions FROM pg_class WHERE relname = '{TABLE}_metadata_idx'"
    assert execute(database, options) == [(None,)]  # as the first release made it
    store, _ = open_collection(database)
    store.close()
    assert execute(database, options) == [(["fastupdate=off"],)]


def test_a_recorded_table_is_opened_as_it_is_and_once_upgraded_is_left_alone(database: str) -> None:
    load(database, "v1")
    store, _ = open_collection(database)
    store.close()
    seg = f"SELECT seg FROM {TABLE}_kwsegs"
    made = execute(database, seg)
    again, _ = open_collection(database)  # neither analyzed again nor its segment made again
    again.close()
    assert execute(database, seg) == made and len(made) == 1


def test_processes_opening_an_older_table_at_once_upgrade_it_once(database: str) -> None:
    load(database, "v1")
    before, errors = execute(database, _ROWS), []

    def open_it() -> None:
        try:
            open_collection(database)[0].close()
        except Exception as exc:  # pragma: no cover - the assertion below shows it
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert execute(database, _ROWS) == before
    assert version(database) == CURRENT_VERSION
    assert len(execute(database, f"SELECT seg FROM {TABLE}_kwsegs")) == 1


def test_a_table_a_newer_vectorsync_upgraded_is_refused(database: str) -> None:
    load(database, "main")
    engine = sa.create_engine(engine_url(database), poolclass=sa.NullPool)
    with engine.begin() as conn:
        record_version(conn, TABLE, CURRENT_VERSION + 1)
    engine.dispose()
    message = (
        f"table '{TABLE}' is at schema version {CURRENT_VERSION + 1}, newer than this vectorsync knows "
        f"({CURRENT_VERSION}): upgrade vectorsync on this machine"
    )
    store = PgvectorStore(database, dimensions=DIMENSIONS)
    try:
        with pytest.raises(SchemaTooNew, match=re.escape(message)):
            store.get_collection(COLLECTION, create=True)
    finally:
        store.close()
