"""A deleted row's keyword postings taken out of the segments holding them, in the transaction that deletes it
(``segments.py`` tells the segments; ``keywords.Delta`` calls ``purge`` with the deleted rows)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import psycopg
import sqlalchemy as sa
from psycopg import sql

import store.vectors.pgvector.postings_cache as postings_cache
from store.errors import StoreUnavailable
from store.vectors.pgvector.segments import pack, posting_tables, unpack

__all__ = ["PURGE_TRIES", "purge"]

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
            held = np.intersect1d(unpack(docs, count), np.asarray(kwdocs, np.int64))
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
        keep = ~np.isin(unpack(parts[0], count), kwdocs)
        if not keep.all():
            rows["terms"].append(term)
            rows["counts"].append(int(keep.sum()))
            for name, part in zip(("docs", "tfs", "lengths"), parts, strict=True):
                rows[name].append(pack(unpack(part, count)[keep]))
    rewrite = sql.SQL(_REWRITE).format(posts=sql.Identifier(postings.name), segs=sql.Identifier(segments.name))
    left = raw.execute(rewrite, {"seg": seg, "deleted": len(kwdocs), **rows}).fetchone()
    if left is not None and left[0] <= 0:  # its last postings purged: the segment goes
        raw.execute(sql.SQL("DELETE FROM {} WHERE seg = %s").format(sql.Identifier(segments.name)), [seg])
    cache = postings_cache.shared()
    for term in rows["terms"]:
        cache.discard(table.name, term, seg)
