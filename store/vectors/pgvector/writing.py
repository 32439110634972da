"""How a pgvector collection's rows are written: the ids a write may write locked first, the rows copied in binary
(each with a new kwdoc, their keyword postings as one segment), and staged rows each replacing the row of its id."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
import sqlalchemy as sa
from psycopg import sql
from sqlalchemy.dialects.postgresql import insert as pg_insert

import store.vectors.pgvector.segments as segments
from store.connect.postgres import driver
from store.errors import StoreUnavailable
from store.vectors.filters import Filter
from store.vectors.keyword.analyzer import Analyzer
from store.vectors.pgvector.keywords import Delta
from store.vectors.pgvector.schema import Schema
from store.vectors.records import VectorRecord, canonical_json, text_digest

__all__ = ["COLUMNS", "MAX_ID_LOCKS", "REPLACE_TRIES", "copy_rows", "insert_replacing", "lock_ids"]

#: A write of more ids than this locks the table from other writers, not each id (``lock_ids``).
MAX_ID_LOCKS = 1000
#: Times a write deletes and inserts again the rows another writer inserted between its DELETE and INSERT.
REPLACE_TRIES = 20
#: The columns of a collection's table a write gives, in the order of COPY's rows.
COLUMNS = (
    "id",
    "record_id",
    "chunk",
    "embedding",
    "text",
    "metadata",
    "model",
    "keywords",
    "keyword_length",
    "kwdoc",
    "text_hash",
)
#: The advisory lock of a key, as ``advisory_lock`` takes it; and the lock of each row id of an array, in its order.
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
_LOCK_IDS = "SELECT count(pg_advisory_xact_lock(hashtextextended(%s || id, 0))) FROM unnest(%s::text[]) AS id"
#: The terms of a row in a collection that keeps no keyword index.
_NO_TERMS: Counter[str] = Counter()
_COPY_TYPES = ["text", "text", "int4", None, "text", "jsonb", "text", "jsonb", "int4", "int8", "bytea"]


def lock_ids(conn: sa.Connection, name: str, ids: list[str], *, swap: Filter | None = None) -> None:
    """Take the advisory lock of each row id a write to table ``name`` may write, in sorted order, first: two
    writes of one id take turns whole, and writes of overlapping ids never wait for each other in a cycle. A write
    of more than ``MAX_ID_LOCKS`` ids locks the table from other writers instead (PostgreSQL's lock table is
    finite); a smaller one holds the table's writers' lock before its ids, so it never waits for such a write while
    holding ids. Between the two, a swap of ``swap``'s set locks that set: two swaps of one set wait for each
    other, else the second one's DELETE could miss rows the first one is inserting (both sets would stay)."""
    mode = "SHARE ROW EXCLUSIVE" if len(ids) > MAX_ID_LOCKS else "ROW EXCLUSIVE"
    raw = driver(conn)
    with raw.pipeline():  # one round trip
        raw.execute(sql.SQL("LOCK TABLE {} IN {} MODE").format(sql.Identifier(name), sql.SQL(mode)))
        if swap is not None:
            raw.execute(_LOCK, [f"{name}:{canonical_json(swap.to_dict())}"])
        if len(ids) <= MAX_ID_LOCKS:
            raw.execute(_LOCK_IDS, [f"{name}:id:", sorted(set(ids))])  # unnest keeps the array's order


def insert_replacing(conn: sa.Connection, table: sa.Table, load: sa.TableClause, delta: Delta, *, name: str) -> None:
    """Write the staged rows (``load``) into ``table`` (collection ``name``'s), each replacing the row of its id,
    counting the keyword statistics exactly.

    A row is replaced by a DELETE and an INSERT, each counted from its own RETURNING, never by an UPDATE:
    PostgreSQL before 18 cannot return the row an UPDATE replaced, and the row read before it (FOR UPDATE)
    could be one that a concurrent swap deleted and wrote again meanwhile (the FOR UPDATE skipped it, the
    UPDATE met the new one: counted in, never out). An id some writer outside ``lock_ids`` inserted between
    the two is deleted and inserted again."""
    t = table.c
    written = sa.exists().where(t.id == load.c.id, t.kwdoc == load.c.kwdoc)
    for _ in range(REPLACE_TRIES):
        delta.delete(sa.delete(table).where(t.id.in_(sa.select(load.c.id))))
        insert = pg_insert(table).from_select(list(COLUMNS), sa.select(*load.c).order_by(load.c.id))
        delta.add(insert.on_conflict_do_nothing(index_elements=["id"]).returning(t.keywords, t.keyword_length), 1)
        if not conn.execute(sa.select(sa.exists().where(~written).select_from(load))).scalar():
            return
        conn.execute(sa.delete(load).where(written))
    raise StoreUnavailable(f"rows of {name!r} kept being written by another writer meanwhile: try again")


def copy_rows(
    raw: psycopg.Connection[Any],
    target: str,
    records: Sequence[VectorRecord],
    *,
    table: sa.Table,
    schema: Schema,
    analyzer: Analyzer | None,
) -> None:
    """Binary COPY of ``records`` into ``target`` (collection ``table`` or its staging table; ~50k rows/s, versus
    hundreds row by row), each with a new kwdoc, and their keyword postings as one segment (``segments.py``); a
    collection that keeps no keyword index (no ``analyzer``) analyzes nothing and writes empty terms and no segment."""
    kwdocs = segments.allocate(raw, table, len(records))
    terms_of = analyzer
    posted = []
    columns = sql.SQL(", ").join(sql.Identifier(c) for c in COLUMNS)
    statement = sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT BINARY)").format(sql.Identifier(target), columns)
    types = [t or schema.vector_type for t in _COPY_TYPES]
    with raw.cursor() as cursor, cursor.copy(statement) as copy:
        copy.set_types(types)
        for r, kwdoc in zip(records, kwdocs, strict=True):
            record_id, chunk = r.metadata.get("record_id"), r.metadata.get("chunk")
            vector = np.asarray(r.embedding, dtype=np.float32)
            terms = terms_of.frequencies(r.text) if terms_of is not None else _NO_TERMS
            copy.write_row(
                (
                    r.id,
                    record_id,
                    chunk,
                    schema.adapt(vector),
                    r.text,
                    psycopg.types.json.Jsonb(r.metadata),
                    r.model,
                    psycopg.types.json.Jsonb(dict(terms)),
                    sum(terms.values()),
                    kwdoc,
                    bytes.fromhex(text_digest(r.text)),
                )
            )
            if terms_of is not None:
                posted.append(segments.Posted(kwdoc, terms))
    if posted:
        segments.write(raw, table, posted)
