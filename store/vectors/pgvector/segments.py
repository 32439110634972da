"""Keyword postings in segments: packed per-term arrays that a search reads in a few rows and scores in numpy.

Why: BM25 in SQL over the rows holding a query's terms costs about 10 µs a row (a jsonb lookup per term), and
a common term is in most rows: 1 s at 100,000 chunks. The same postings packed as arrays cost a memcpy to
read and nanoseconds a posting to score.

Every written row version gets a new ``kwdoc`` (an identity, never reused). The transaction that writes rows
also writes their postings as one new segment: per term, a row of ``<table>_kwpost`` holding the kwdocs, term
frequencies and row lengths as big-endian arrays, plus the segment's row in ``<table>_kwsegs``. So a reader
sees rows and postings together or neither; writes contend only to purge (``purging.purge``): the write that
replaces or deletes a row takes its postings out, so none of a deleted text outlives its delete. A search
(``scoring.best``) still keeps only candidates whose kwdoc is in the table: a row deleted between its two reads.
``merge`` (after a write commits) joins ``FANOUT`` segments of one size class into one of the next; a segment's
class is ``log_FANOUT(docs / BASE_DOCS)``, so a search reads at most about ``FANOUT`` rows per term and class.

This module writes, merges and rebuilds the segments; ``scoring.py`` reads them for a search, with the live
statistics (``keywords.statistics``) exactly as the SQL path does; ``purging.py`` takes a deleted row's postings
out.
"""

from __future__ import annotations

import math
import secrets
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
import sqlalchemy as sa
from psycopg import sql

__all__ = [
    "BASE_DOCS",
    "FANOUT",
    "Posted",
    "allocate",
    "clear",
    "compact",
    "drop",
    "merge",
    "pack",
    "posting_tables",
    "rebuild",
    "unpack",
    "write",
]

#: Segments of one size class merged into one of the next.
FANOUT = 4
#: Segments of fewer rows than this are all of class 0.
BASE_DOCS = 256

#: A term's postings in one segment: the term, then its kwdocs, term frequencies and row lengths.
_Postings = tuple[str, np.ndarray, np.ndarray, np.ndarray]
_WIDTHS: dict[int, np.dtype[Any]] = {1: np.dtype(">u1"), 2: np.dtype(">u2"), 4: np.dtype(">u4"), 8: np.dtype(">u8")}


def pack(values: np.ndarray) -> bytes:
    """Non-negative integers, big-endian, in the fewest bytes each that hold the largest (1, 2, 4 or 8)."""
    top = int(values.max()) if len(values) else 0
    width = next(w for w in (1, 2, 4, 8) if top < 256**w)
    return values.astype(_WIDTHS[width]).tobytes()


def unpack(data: bytes, count: int) -> np.ndarray:
    """``pack``'s integers (their width is the bytes per posting), as int64."""
    return np.frombuffer(data, _WIDTHS[len(data) // count]).astype(np.int64) if count else np.array([], np.int64)


@dataclass(frozen=True)
class Posted:
    """A row about to be written: its kwdoc, its terms' frequencies and its length."""

    kwdoc: int
    terms: Counter[str]


def posting_tables(table: sa.Table) -> tuple[sa.Table, sa.Table]:
    """The segments and postings tables of a collection's ``table`` (declared in the same metadata)."""
    names = (f"{table.name}_kwsegs", f"{table.name}_kwpost")
    if names[0] in table.metadata.tables:
        return table.metadata.tables[names[0]], table.metadata.tables[names[1]]
    segments = sa.Table(
        names[0],
        table.metadata,
        sa.Column("seg", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("docs", sa.Integer, nullable=False),
        sa.Column("level", sa.SmallInteger, nullable=False),
    )
    postings = sa.Table(
        names[1],
        table.metadata,
        sa.Column("term", sa.Text, primary_key=True),
        sa.Column("seg", sa.BigInteger, primary_key=True),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("docs", sa.LargeBinary, nullable=False),
        sa.Column("tfs", sa.LargeBinary, nullable=False),
        sa.Column("lengths", sa.LargeBinary, nullable=False),
    )
    return segments, postings


def _new_seg() -> int:
    """A segment's id: random, so that no two segments of any table or database share one, and a process's
    decoded postings (``postings_cache``) can never be taken for another's, even after a table is made again."""
    return secrets.randbits(62) + 1


def _level(docs: int) -> int:
    return 0 if docs < BASE_DOCS else int(math.log(docs / BASE_DOCS, FANOUT)) + 1


def allocate(raw: psycopg.Connection[Any], table: sa.Table, count: int) -> list[int]:
    """``count`` new kwdocs from the table's identity sequence."""
    if not count:
        return []
    query = sql.SQL("SELECT nextval(pg_get_serial_sequence({}, 'kwdoc')) FROM generate_series(1, %s)").format(
        sql.Literal(table.name)
    )
    return [row[0] for row in raw.execute(query, [count]).fetchall()]


def write(raw: psycopg.Connection[Any], table: sa.Table, rows: Iterable[Posted]) -> None:
    """Store ``rows``' postings as one new segment (in the caller's transaction, beside the rows)."""
    docs: dict[str, list[int]] = defaultdict(list)
    tfs: dict[str, list[int]] = defaultdict(list)
    lengths: dict[str, list[int]] = defaultdict(list)
    count = 0
    for row in rows:
        length = sum(row.terms.values())
        if not length:
            continue
        count += 1
        for term, tf in row.terms.items():
            docs[term].append(row.kwdoc)
            tfs[term].append(tf)
            lengths[term].append(length)
    if not count:
        return
    _store(raw, table, count, ((t, np.array(docs[t]), np.array(tfs[t]), np.array(lengths[t])) for t in docs))


def _store(raw: psycopg.Connection[Any], table: sa.Table, count: int, terms: Iterable[_Postings]) -> None:
    segments, postings = posting_tables(table)
    seg = _new_seg()
    raw.execute(
        sql.SQL("INSERT INTO {} (seg, docs, level) VALUES (%s, %s, %s)").format(sql.Identifier(segments.name)),
        [seg, count, _level(count)],
    )
    statement = sql.SQL("COPY {} (term, seg, count, docs, tfs, lengths) FROM STDIN WITH (FORMAT BINARY)").format(
        sql.Identifier(postings.name)
    )
    with raw.cursor() as cursor, cursor.copy(statement) as copy:
        copy.set_types(["text", "int8", "int4", "bytea", "bytea", "bytea"])
        for term, docs, tfs, lengths in terms:
            copy.write_row((term, seg, len(docs), pack(docs), pack(tfs), pack(lengths)))


def merge(raw: psycopg.Connection[Any], table: sa.Table) -> int:
    """Merge the segments of every size class that has ``FANOUT`` or more, lowest first, dropping dead postings;
    return how many merges. Segments another merge holds are skipped (``SKIP LOCKED``): two never merge one."""
    segs = sql.Identifier(posting_tables(table)[0].name)
    merged = 0
    while True:
        full = raw.execute(
            sql.SQL("SELECT level FROM {} GROUP BY level HAVING count(*) >= %s ORDER BY level LIMIT 1").format(segs),
            [FANOUT],
        ).fetchone()
        if full is None:
            return merged
        taken = [
            r[0]
            for r in raw.execute(
                sql.SQL("SELECT seg FROM {} WHERE level = %s ORDER BY seg LIMIT %s FOR UPDATE SKIP LOCKED").format(
                    segs
                ),
                [full[0], FANOUT],
            ).fetchall()
        ]
        if len(taken) < FANOUT:
            return merged
        _join(raw, table, taken)
        merged += 1


def compact(raw: psycopg.Connection[Any], table: sa.Table) -> None:
    """Merge every segment no other merge holds into one, dropping dead postings (after a bulk load)."""
    segs = sql.Identifier(posting_tables(table)[0].name)
    taken = [
        r[0]
        for r in raw.execute(sql.SQL("SELECT seg FROM {} ORDER BY seg FOR UPDATE SKIP LOCKED").format(segs)).fetchall()
    ]
    if len(taken) > 1:
        _join(raw, table, taken)


def _join(raw: psycopg.Connection[Any], table: sa.Table, taken: list[int]) -> None:
    """Replace segments ``taken`` by one holding their postings whose rows are still in the table."""
    segments, postings = posting_tables(table)
    segs, posts = sql.Identifier(segments.name), sql.Identifier(postings.name)
    with raw.cursor(binary=True) as cursor:
        cursor.execute(
            sql.SQL("SELECT term, count, docs, tfs, lengths FROM {} WHERE seg = ANY(%s) ORDER BY term, seg").format(
                posts
            ),
            [taken],
        )
        found = cursor.fetchall()
    by_term: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = defaultdict(list)
    for term, count, docs, tfs, lengths in found:
        by_term[term].append((unpack(docs, count), unpack(tfs, count), unpack(lengths, count)))
    every = np.unique(
        np.concatenate([d for parts in by_term.values() for d, _, _ in parts]) if by_term else np.array([], np.int64)
    )
    live = raw.execute(
        sql.SQL("SELECT kwdoc FROM {} WHERE kwdoc = ANY(%s)").format(sql.Identifier(table.name)), [every.tolist()]
    ).fetchall()
    raw.execute(sql.SQL("DELETE FROM {} WHERE seg = ANY(%s)").format(posts), [taken])
    raw.execute(sql.SQL("DELETE FROM {} WHERE seg = ANY(%s)").format(segs), [taken])
    if not live:
        return
    alive = np.isin(every, np.array([r[0] for r in live], np.int64))  # by position in ``every`` (sorted)

    def kept() -> Iterable[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
        for term, parts in by_term.items():
            docs = np.concatenate([d for d, _, _ in parts])
            keep = alive[np.searchsorted(every, docs)]
            if keep.any():
                tfs = np.concatenate([t for _, t, _ in parts])
                lengths = np.concatenate([n for _, _, n in parts])
                yield term, docs[keep], tfs[keep], lengths[keep]

    _store(raw, table, len(live), kept())


def rebuild(raw: psycopg.Connection[Any], table: sa.Table) -> None:
    """Postings of every row anew, as one segment, built by PostgreSQL from the rows' terms (after a bulk load, a
    backfill or an upgrade). The caller keeps writers out (a table lock): a segment committed meanwhile would
    count its rows twice."""
    segments, postings = posting_tables(table)
    segs, posts, name = sql.Identifier(segments.name), sql.Identifier(postings.name), sql.Identifier(table.name)
    raw.execute(sql.SQL("DELETE FROM {}").format(posts))
    raw.execute(sql.SQL("DELETE FROM {}").format(segs))
    count = raw.execute(sql.SQL("SELECT count(*) FROM {} WHERE keyword_length > 0").format(name)).fetchone()
    if not count or not count[0]:
        return
    seg = _new_seg()
    raw.execute(
        sql.SQL("INSERT INTO {} (seg, docs, level) VALUES (%s, %s, %s)").format(segs), [seg, count[0], _level(count[0])]
    )
    raw.execute(
        sql.SQL(
            "INSERT INTO {posts} (term, seg, count, docs, tfs, lengths) SELECT e.key, %s, count(*), "
            "string_agg(int8send(r.kwdoc), ''::bytea ORDER BY r.kwdoc), "
            "string_agg(int4send((e.value #>> '{{}}')::int4), ''::bytea ORDER BY r.kwdoc), "
            "string_agg(int4send(r.keyword_length), ''::bytea ORDER BY r.kwdoc) "
            "FROM {name} r CROSS JOIN LATERAL jsonb_each(r.keywords) e WHERE r.keyword_length > 0 GROUP BY e.key"
        ).format(posts=posts, name=name),
        [seg],
    )


def clear(raw: psycopg.Connection[Any], table: sa.Table) -> None:
    """Forget every segment (the table was emptied)."""
    segments, postings = posting_tables(table)
    raw.execute(sql.SQL("TRUNCATE {}, {}").format(sql.Identifier(postings.name), sql.Identifier(segments.name)))


def drop(conn: sa.Connection, table: sa.Table) -> None:
    """Drop the segments and postings tables."""
    for part in posting_tables(table):
        part.drop(conn, checkfirst=True)
