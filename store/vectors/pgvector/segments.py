"""Keyword postings in segments: packed per-term arrays that a search reads in a few rows and scores in numpy.

Why: BM25 in SQL over the rows holding a query's terms costs about 10 µs a row (a jsonb lookup per term), and
a common term is in most rows: 1 s at 100,000 chunks. The same postings packed as arrays cost a memcpy to
read and nanoseconds a posting to score.

Every written row version gets a new ``kwdoc`` (an identity, never reused). The transaction that writes rows
also writes their postings as one new segment: per term, a row of ``<table>_kwpost`` holding the kwdocs, term
frequencies and row lengths as big-endian arrays, plus the segment's row in ``<table>_kwsegs``. So a reader
sees rows and postings together or neither; writes contend only to purge (``purge``): the write that replaces
or deletes a row takes its postings out, so none of a deleted text outlives its delete. A search still keeps
only candidates whose kwdoc is in the table (``best``): a row deleted between its two reads. ``merge`` (after a
write commits) joins ``FANOUT`` segments of one size class into one of the next; a segment's class is
``log_FANOUT(docs / BASE_DOCS)``, so a search reads at most about ``FANOUT`` rows per term and class.

The scores use the live statistics (``keywords.statistics``), exactly as the SQL path does; the segments only
say which rows hold a term and how often.
"""

from __future__ import annotations

import math
import secrets
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
import sqlalchemy as sa
from psycopg import sql

import store.vectors.pgvector.postings_cache as postings_cache
from store.connect.postgres import driver
from store.errors import StoreUnavailable
from store.vectors.keyword import bm25
from store.vectors.records import VectorMatch

__all__ = [
    "BASE_DOCS",
    "FANOUT",
    "Posted",
    "allocate",
    "best",
    "clear",
    "compact",
    "drop",
    "merge",
    "posting_tables",
    "purge",
    "rebuild",
    "scores",
    "write",
]

#: Segments of one size class merged into one of the next.
FANOUT = 4
#: Segments of fewer rows than this are all of class 0.
BASE_DOCS = 256

#: A term's postings in one segment: the term, then its kwdocs, term frequencies and row lengths.
_Postings = tuple[str, np.ndarray, np.ndarray, np.ndarray]
_WIDTHS: dict[int, np.dtype[Any]] = {1: np.dtype(">u1"), 2: np.dtype(">u2"), 4: np.dtype(">u4"), 8: np.dtype(">u8")}


def _pack(values: np.ndarray) -> bytes:
    """Non-negative integers, big-endian, in the fewest bytes each that hold the largest (1, 2, 4 or 8)."""
    top = int(values.max()) if len(values) else 0
    width = next(w for w in (1, 2, 4, 8) if top < 256**w)
    return values.astype(_WIDTHS[width]).tobytes()


def _unpack(data: bytes, count: int) -> np.ndarray:
    """``_pack``'s integers (their width is the bytes per posting), as int64."""
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
            copy.write_row((term, seg, len(docs), _pack(docs), _pack(tfs), _pack(lengths)))


#: Times ``purge`` looks a deleted row's segment up again after a merge replaced it, before it gives up.
PURGE_TRIES = 20
#: Each deleted row's rarest term (fewest postings) with its postings in every segment (``_segments_of``).
_PROBE = (
    "WITH d AS (SELECT kwdoc, keywords FROM {dead} WHERE %(all)s OR kwdoc = ANY(%(only)s::int8[])), "
    "sizes AS (SELECT term, sum(count) AS n FROM {posts} WHERE term IN (SELECT jsonb_object_keys(keywords) FROM d) "
    "GROUP BY term), probes AS (SELECT DISTINCT ON (d.kwdoc) d.kwdoc, s.term FROM d CROSS JOIN LATERAL "
    "jsonb_object_keys(d.keywords) AS k(term) JOIN sizes AS s ON s.term = k.term ORDER BY d.kwdoc, s.n, s.term), "
    "wanted AS (SELECT term, array_agg(kwdoc) AS kwdocs FROM probes GROUP BY term) "
    "SELECT p.seg, p.count, p.docs, w.kwdocs FROM {posts} AS p JOIN wanted AS w ON w.term = p.term"
)
#: One segment's postings rows written again (those left with none deleted) and its count of rows lowered.
_REWRITE = (
    "WITH k AS (SELECT * FROM unnest(%(terms)s::text[], %(counts)s::int4[], %(docs)s::bytea[], %(tfs)s::bytea[], "
    "%(lengths)s::bytea[]) AS k(term, count, docs, tfs, lengths)), "
    "gone AS (DELETE FROM {posts} AS p USING k WHERE p.seg = %(seg)s AND p.term = k.term AND k.count = 0), "
    "kept AS (UPDATE {posts} AS p SET count = k.count, docs = k.docs, tfs = k.tfs, lengths = k.lengths FROM k "
    "WHERE p.seg = %(seg)s AND p.term = k.term AND k.count > 0) "
    "UPDATE {segs} SET docs = docs - %(deleted)s WHERE seg = %(seg)s RETURNING docs"
)


def purge(raw: psycopg.Connection[Any], table: sa.Table, dead: str) -> None:
    """Take the postings of the rows this transaction deleted (the temporary table ``dead``: their kwdoc and
    keywords) out of the segments holding them, in the transaction that deletes them: once it commits, no table
    holds a deleted text's terms or postings, and a crash cannot leave them behind.

    Cost, bounded by the deleted rows: a row's segment is found through its rarest term's postings, then only
    that segment's postings of the row's terms are read and written again, never another term or segment (a row
    in a large merged segment costs about what its terms' postings there weigh), never the whole index. The
    segments stay locked (``FOR UPDATE``) until the commit: merges skip them; one a merge replaced meanwhile is
    looked up again in the merged one."""
    pending = None
    for _ in range(PURGE_TRIES):
        found = _segments_of(raw, table, dead, pending)
        lock = sql.SQL("SELECT seg FROM {} WHERE seg = ANY(%s) ORDER BY seg FOR UPDATE")  # waits for a merge
        segs = raw.execute(lock.format(sql.Identifier(posting_tables(table)[0].name)), [sorted(found)]).fetchall()
        locked = {row[0] for row in segs}  # a segment merged away meanwhile is gone
        for seg in locked:
            _purge_segment(raw, table, (dead, seg), found[seg])
        pending = [int(k) for seg in found.keys() - locked for k in found[seg]]
        if not pending:
            return
    raise StoreUnavailable(f"the keyword segments of {table.name} kept being merged under a delete: try again")


def _segments_of(raw: psycopg.Connection[Any], table: sa.Table, dead: str, only: Any) -> dict[int, np.ndarray]:
    """The segments holding the deleted rows' postings (those of ``only``, when given), each with its deleted
    kwdocs: each row is looked for in the postings of its term with the fewest, the cheapest to read."""
    _, postings = posting_tables(table)
    statement = sql.SQL(_PROBE).format(dead=sql.Identifier(dead), posts=sql.Identifier(postings.name))
    found: dict[int, list[np.ndarray]] = defaultdict(list)
    with raw.cursor(binary=True) as cursor:
        cursor.execute(statement, {"all": only is None, "only": only or []})
        for seg, count, docs, kwdocs in cursor.fetchall():
            held = np.intersect1d(_unpack(docs, count), np.asarray(kwdocs, np.int64))
            if len(held):
                found[seg].append(held)
    return {seg: np.unique(np.concatenate(parts)) for seg, parts in found.items()}


def _purge_segment(raw: psycopg.Connection[Any], table: sa.Table, where: tuple[str, int], kwdocs: np.ndarray) -> None:
    """Write segment ``seg``'s postings of the deleted rows' terms again without ``kwdocs`` (``where``: the
    temporary table of the deleted rows and the segment), in one statement; a term left with none loses its
    row, and the segment, left with no row, goes."""
    dead, seg = where
    segments, postings = posting_tables(table)
    with raw.cursor(binary=True) as cursor:
        cursor.execute(
            sql.SQL(
                "SELECT term, count, docs, tfs, lengths FROM {posts} WHERE seg = %(seg)s AND term IN "
                "(SELECT DISTINCT jsonb_object_keys(keywords) FROM {dead} WHERE kwdoc = ANY(%(kwdocs)s))"
            ).format(posts=sql.Identifier(postings.name), dead=sql.Identifier(dead)),
            {"seg": seg, "kwdocs": kwdocs.tolist()},
        )
        found = cursor.fetchall()
    rows: dict[str, list[Any]] = {"terms": [], "counts": [], "docs": [], "tfs": [], "lengths": []}
    for term, count, *parts in found:
        keep = ~np.isin(_unpack(parts[0], count), kwdocs)
        if not keep.all():
            rows["terms"].append(term)
            rows["counts"].append(int(keep.sum()))
            for name, part in zip(("docs", "tfs", "lengths"), parts, strict=True):
                rows[name].append(_pack(_unpack(part, count)[keep]))
    rewrite = sql.SQL(_REWRITE).format(posts=sql.Identifier(postings.name), segs=sql.Identifier(segments.name))
    left = raw.execute(rewrite, {"seg": seg, "deleted": len(kwdocs), **rows}).fetchone()
    if left is not None and left[0] <= 0:  # its last postings purged: the segment goes
        raw.execute(sql.SQL("DELETE FROM {} WHERE seg = %s").format(sql.Identifier(segments.name)), [seg])
    cache = postings_cache.shared()
    for term in rows["terms"]:
        cache.discard(table.name, term, seg)


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
        by_term[term].append((_unpack(docs, count), _unpack(tfs, count), _unpack(lengths, count)))
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


def scores(
    raw: psycopg.Connection[Any], table: sa.Table, terms: Sequence[str], *, n: int, avgdl: float, df: dict[str, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Every posted kwdoc holding one of ``terms`` (those in ``df``) and its BM25 score, dead rows included;
    the terms summed in ``terms``' order, with the SQL path's formula."""
    present = [t for t in terms if t in df]
    _, postings = posting_tables(table)
    cache = postings_cache.shared()
    cached = [f"{seg} {count} {term}" for term in present for seg, count in cache.versions(table.name, term).items()]
    # the postings decoded here, at the count they still have, are not sent again (a CASE never reads the value)
    with raw.cursor(binary=True) as cursor:
        cursor.execute(
            sql.SQL(
                "SELECT term, seg, count, CASE WHEN {held} THEN NULL ELSE docs END, "
                "CASE WHEN {held} THEN NULL ELSE tfs END, CASE WHEN {held} THEN NULL ELSE lengths END "
                "FROM {posts} WHERE term = ANY(%(terms)s) ORDER BY seg"
            ).format(
                held=sql.SQL("seg || ' ' || count || ' ' || term = ANY(%(held)s)"),
                posts=sql.Identifier(postings.name),
            ),
            {"held": cached, "terms": present},
        )
        found = cursor.fetchall()
    by_term: dict[str, list[postings_cache.Decoded]] = defaultdict(list)
    segs_of: dict[str, set[int]] = defaultdict(set)
    for term, seg, count, docs, tfs, lengths in found:
        segs_of[term].add(seg)
        decoded = cache.get(table.name, term, seg) if docs is None else None
        if decoded is not None and len(decoded.docs) != count:
            decoded = None  # purged and decoded again by another search meanwhile: read it again
        if decoded is None:
            if docs is None:  # evicted since: read it again
                return scores(raw, table, terms, n=n, avgdl=avgdl, df=df)
            decoded = postings_cache.Decoded(
                _unpack(docs, count), _unpack(tfs, count).astype(np.float64), _unpack(lengths, count).astype(np.float64)
            )
            cache.put(table.name, term, seg, decoded)
        by_term[term].append(decoded)
    for term in present:
        cache.keep_only(table.name, term, segs_of.get(term, set()))
    all_docs: list[np.ndarray] = []
    all_weights: list[np.ndarray] = []
    for term in present:
        parts = by_term.get(term)
        if not parts:
            continue
        idf = bm25.idf(df[term], n)
        all_docs.extend(part.docs for part in parts)
        all_weights.extend(idf * part.weights(avgdl) for part in parts)
    if not all_docs:
        return np.array([], np.int64), np.array([], np.float64)
    docs, weights = np.concatenate(all_docs), np.concatenate(all_weights)
    low, high = int(docs.min()), int(docs.max())
    if high - low < 4 * len(docs) + 1024:
        summed = np.bincount(docs - low, weights=weights)
        held = np.flatnonzero(summed)  # every weight is above 0: the idf is, and so is a posting's tf
        return held + low, summed[held]
    unique, inverse = np.unique(docs, return_inverse=True)
    return unique, np.bincount(inverse, weights=weights)


#: The first round checks this many times ``limit`` of the best-scored kwdocs (at least ``MIN_CANDIDATES``).
CANDIDATES = 4
MIN_CANDIDATES = 40
#: After this many kwdocs checked without ``limit`` live rows passing the filter, the SQL path ranks instead.
MAX_CANDIDATES = 20_000


def best(
    conn: sa.Connection, table: sa.Table, terms: Sequence[str], *, where: Any, limit: int
) -> list[VectorMatch] | None:
    """The ``limit`` live rows matching ``where`` with the best BM25 score for ``terms``, best first, ties by id;
    None when the filter keeps so few of the best-scored rows that the SQL path should rank instead.

    Candidates are checked best first, in rounds four times larger, each with every kwdoc tied with its last:
    once ``limit`` have been found live and passing, no unchecked row can score above the ``limit``-th."""
    from store.vectors.pgvector.keywords import statistics

    n, avgdl, df = statistics(conn, table, terms)
    for gone in set(terms) - df.keys():  # no row holds it: its postings decoded here are a deleted text's
        postings_cache.shared().keep_only(table.name, gone, set())
    if not df:
        return []
    raw = driver(conn)
    kwdocs, scored = scores(raw, table, terms, n=n, avgdl=avgdl, df=df)
    found: dict[str, VectorMatch] = {}
    above, want = np.inf, max(CANDIDATES * limit, MIN_CANDIDATES)
    while True:
        # this round: every kwdoc scoring at least the ``want``-th best, not checked by an earlier round
        bar = -np.inf if want >= len(scored) else float(np.partition(scored, len(scored) - want)[len(scored) - want])
        chosen = (scored >= bar) & (scored < above)
        batch, batch_scores = kwdocs[chosen], scored[chosen]
        query = sa.select(table.c.id, table.c.text, table.c.metadata, table.c.kwdoc).where(
            table.c.kwdoc == sa.func.any(sa.literal(batch.tolist(), sa.ARRAY(sa.BigInteger))), where
        )
        score_of = dict(zip(batch.tolist(), batch_scores.tolist(), strict=True))
        for row in conn.execute(query).all():
            found[row.id] = VectorMatch(id=row.id, score=score_of[row.kwdoc], text=row.text, metadata=row.metadata)
        if len(found) >= limit or bar == -np.inf:
            break
        if want >= MAX_CANDIDATES:
            return None
        above, want = bar, want * CANDIDATES
    return sorted(found.values(), key=lambda m: (-m.score, m.id))[:limit]
