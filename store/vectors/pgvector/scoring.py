"""A keyword search over the segments: each term's postings decoded (or taken from this process's cache), scored
in numpy with BM25, and the best live rows that pass the filter (``segments.py`` tells the segments)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
import sqlalchemy as sa
from psycopg import sql

import store.vectors.pgvector.postings_cache as postings_cache
from store.connect.postgres import driver
from store.vectors.keyword import bm25
from store.vectors.pgvector.keywords import statistics
from store.vectors.pgvector.segments import posting_tables, unpack
from store.vectors.records import VectorMatch

__all__ = ["CANDIDATES", "MAX_CANDIDATES", "MIN_CANDIDATES", "best", "scores"]


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
                unpack(docs, count), unpack(tfs, count).astype(np.float64), unpack(lengths, count).astype(np.float64)
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
