"""BM25 on pgvector: each row's terms in a jsonb column, collection statistics kept at write time.

Each row holds ``keywords`` (jsonb ``{term: tf}``, the analyzer's terms: PostgreSQL never re-tokenizes or
re-stems them) and ``keyword_length`` (its number of terms); a GIN index (``jsonb_ops``) on ``keywords``
finds the rows holding any query term (``keywords ?| terms``). jsonb rather than ``tsvector``: a row's tf for a
term is one key lookup, while a tsvector gives it only by unnesting the whole vector, and caps positions.

Statistics: ``<table>_kwstats (term, shard, docs, tokens)``. A term's row counts the records holding it (df);
the row of the empty term counts the records with any term (N) and their terms (for avgdl). Why kept at write
time: measured on 100,000 rows (bench/keyword_latency.py), counting a common term's df at query time through
the GIN index costs 20-40 ms, and N with avgdl a scan of the table (~90 ms), against ~5 ms for the vector leg;
reading the statistics here is one index scan of a few rows.

How writes keep them without contention or deadlock: each write transaction collects its changes (+1 per new
row's term, -1 per replaced or deleted row's term, taken from the rows as locked or deleted, so a concurrent
write is never counted twice) in a temporary table, and adds them as its last statement, in term order, to one
of ``SHARDS`` rows per term chosen per transaction. Two writers meet on a row only when they drew the same
shard, and then wait for each other's commit, never in a cycle: the rows are taken in one order, and last.
Reading sums a term's shards.

Each change is counted from what a statement did: rows out from a DELETE's RETURNING, rows in from an INSERT's or
a COPY's own rows, never from a read that a concurrent write could outdate (the writers in ``writing.py`` replace
a row by a DELETE and an INSERT, not an UPDATE, for that). Erasure: a transaction that deletes rows also purges
their postings (``purging.purge``) and takes out the statistics rows of the terms no row holds any more
(``_drop_unheld``), under the table's erase lock, so once it commits no table holds the deleted text's terms.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg import sql
from psycopg.types.json import Jsonb
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, insert

from store.connect.postgres import advisory_lock, driver
from store.vectors.keyword import bm25

__all__ = [
    "BACKFILL_PAGE",
    "DEAD_TABLE",
    "DELTA_TABLE",
    "SHARDS",
    "Delta",
    "Purge",
    "backfill",
    "count_rows",
    "drifted_terms",
    "keyword_query",
    "ranked",
    "statistics",
    "stats_table",
]

#: Rows per term in the statistics table: concurrent writers spread over them.
SHARDS = 16
#: Rows a backfill analyzes and writes back at once.
BACKFILL_PAGE = 2000
#: The temporary table a write transaction collects its statistics changes in.
DELTA_TABLE = "vs_kwdelta"
#: The temporary table a write transaction keeps the rows it deleted in (kwdoc, keywords), for their purge.
DEAD_TABLE = "vs_kwdead"
#: The statistics row of the whole collection (N and the sum of lengths): no term is empty.
TOTAL = ""

_log = logging.getLogger(__name__)
#: ``purging.purge``'s shape: the connection, the collection's table, the temporary table of the deleted rows.
Purge = Callable[[psycopg.Connection[Any], sa.Table, str], None]
_delta = sa.table(
    DELTA_TABLE, sa.column("term", sa.Text), sa.column("docs", sa.BigInteger), sa.column("tokens", sa.BigInteger)
)
_dead = sa.table(DEAD_TABLE, sa.column("kwdoc", sa.BigInteger), sa.column("keywords", JSONB))


def stats_table(table: sa.Table) -> sa.Table:
    """The statistics table of a collection's ``table`` (declared in the same metadata)."""
    name = f"{table.name}_kwstats"
    if name in table.metadata.tables:
        return table.metadata.tables[name]
    return sa.Table(
        name,
        table.metadata,
        sa.Column("term", sa.Text, primary_key=True),
        sa.Column("shard", sa.SmallInteger, primary_key=True),
        sa.Column("docs", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("tokens", sa.BigInteger, nullable=False, server_default="0"),
    )


class Delta:
    """One write transaction's changes to the statistics, applied by ``apply`` as its last statement."""

    def __init__(self, conn: sa.Connection, table: sa.Table, *, counting: bool = True, purge: Purge | None = None):
        self.conn, self.table, self.stats = conn, table, stats_table(table)
        #: False for a collection that keeps no keyword index: statements run, nothing is counted.
        self.counting = counting
        #: What takes the deleted rows' postings out of the segments (``purging.purge``), given the temporary
        #: table of those rows; None where no row is deleted.
        self.purge = purge
        self._open = self._deleted = False

    def _ready(self) -> None:
        if not self._open:
            create = "CREATE TEMP TABLE IF NOT EXISTS {} ({}) ON COMMIT DROP"
            driver(self.conn).execute(  # both in one round trip
                sql.SQL("; ").join(
                    sql.SQL(create).format(sql.Identifier(name), sql.SQL(columns))
                    for name, columns in (
                        (DELTA_TABLE, "term text, docs bigint, tokens bigint"),
                        (DEAD_TABLE, "kwdoc bigint, keywords jsonb"),
                    )
                )
            )
            self._open = True

    def add(self, rows: Any, sign: int) -> None:
        """Count ``sign`` times the rows ``rows`` returns: a SELECT, or an INSERT ... RETURNING of ``keywords`` and
        ``keyword_length`` (run here, as a CTE of the one statement that counts them)."""
        if not self.counting:
            if not isinstance(rows, sa.Select):
                self.conn.execute(rows)  # an INSERT still writes; a SELECT only counted
            return
        self._ready()
        source = rows.cte("counted")
        self.conn.execute(self._counted(source, sign).add_cte(source))

    def delete(self, statement: sa.Delete) -> None:
        """Run ``statement`` (a DELETE of the collection's rows), counting the rows it deletes out and keeping
        their kwdocs and terms for ``apply``'s purge, in the same statement."""
        if not self.counting:
            self.conn.execute(statement)
            return
        self._ready()
        c = self.table.c
        source = statement.returning(c.keywords, c.keyword_length, c.kwdoc).cte("counted")
        deleted = sa.select(source.c.kwdoc, source.c.keywords).where(source.c.keyword_length > 0)
        kept = sa.insert(_dead).from_select(["kwdoc", "keywords"], deleted).cte("kept")
        self.conn.execute(self._counted(source, -1).add_cte(source).add_cte(kept))
        self._deleted = True

    @staticmethod
    def _counted(source: Any, sign: int) -> sa.Insert:
        """The INSERT of ``source``'s rows' changes (``sign`` each) into the transaction's delta table."""
        terms = sa.select(
            sa.func.jsonb_object_keys(source.c.keywords), sa.literal(sign, sa.BigInteger), sa.literal(0, sa.BigInteger)
        ).select_from(source)
        total = (
            sa.select(
                sa.literal(TOTAL),
                sign * sa.func.count(),
                sign * sa.func.coalesce(sa.func.sum(source.c.keyword_length), 0),
            )
            .select_from(source)
            .where(source.c.keyword_length > 0)
        )
        return sa.insert(_delta).from_select(["term", "docs", "tokens"], sa.union_all(terms, total))

    def apply(self) -> None:
        """The deleted rows' postings purged; the collected changes added to one shard of the statistics, in term
        order; the terms no row holds any more taken out; then the changes forgotten. A transaction that deleted
        rows does it under the table's erase lock: such transactions take turns here, so ``_drop_unheld`` sees
        every other one's counting out committed (why it can finish the job in this transaction)."""
        if not self._open:
            return
        raw = driver(self.conn)
        erasing = self._deleted and bool(self.conn.execute(sa.select(sa.exists().select_from(_dead))).scalar())
        if erasing:
            advisory_lock(self.conn, f"{self.table.name}:erase")
            if self.purge is not None:
                self.purge(raw, self.table, DEAD_TABLE)
        summed = (
            sa.select(
                _delta.c.term,
                sa.literal(random.randrange(SHARDS), sa.SmallInteger),
                sa.func.sum(_delta.c.docs),
                sa.func.sum(_delta.c.tokens),
            )
            .group_by(_delta.c.term)
            .having(sa.or_(sa.func.sum(_delta.c.docs) != 0, sa.func.sum(_delta.c.tokens) != 0))
            .order_by(_delta.c.term)
        )
        upsert = insert(self.stats).from_select(["term", "shard", "docs", "tokens"], summed)
        upsert = upsert.on_conflict_do_update(
            index_elements=["term", "shard"],
            set_={
                "docs": self.stats.c.docs + upsert.excluded.docs,
                "tokens": self.stats.c.tokens + upsert.excluded.tokens,
            },
        )
        self.conn.execute(upsert)
        if erasing:
            _drop_unheld(self.conn, self.stats)
        raw.execute(sql.SQL("DROP TABLE {}, {}").format(sql.Identifier(DELTA_TABLE), sql.Identifier(DEAD_TABLE)))
        self._open = self._deleted = False


def _drop_unheld(conn: sa.Connection, stats: sa.Table) -> None:
    """Delete the statistics rows of the terms this transaction counted out whose shards now sum to nothing (no
    row holds them): a deleted text's terms leave no zero-count row behind.

    Run under the erase lock, after this transaction's own changes: every other transaction that counts a term
    out has committed or waits, so a row another one holds (``SKIP LOCKED``: never waited for, it may be waiting
    for ours) is one counting the term in, which keeps it. Only rows locked here and summing to nothing per term
    go, so whatever was skipped, no term's sum changes."""
    out = sa.select(_delta.c.term).group_by(_delta.c.term).having(sa.func.sum(_delta.c.docs) < 0)
    locked = conn.execute(
        sa.select(stats.c.term, stats.c.shard, stats.c.docs, stats.c.tokens)
        .where(stats.c.term.in_(out))
        .order_by(stats.c.term, stats.c.shard)
        .with_for_update(skip_locked=True)
    ).all()
    sums: dict[str, tuple[int, int]] = {}
    for row in locked:
        docs, tokens = sums.get(row.term, (0, 0))
        sums[row.term] = (docs + row.docs, tokens + row.tokens)
    gone = [row for row in locked if sums[row.term] == (0, 0)]
    if gone:
        driver(conn).execute(
            sql.SQL(
                "DELETE FROM {} AS s USING unnest(%s::text[], %s::int2[]) AS g(term, shard) "
                "WHERE s.term = g.term AND s.shard = g.shard"
            ).format(sql.Identifier(stats.name)),
            [[row.term for row in gone], [row.shard for row in gone]],
        )


def count_rows(conn: sa.Connection, table: sa.Table) -> int:
    """Statistics made anew from every row (after a bulk load into an empty table, or a backfill, or to repair
    drift); returns how many terms (the collection's total among them) were counted wrong before. A term whose
    shards summed to nothing was counted right (no row holds it): its rows go, logged, but are no repair."""
    stats = stats_table(table)
    summed = sa.select(
        stats.c.term, sa.func.sum(stats.c.docs).label("docs"), sa.func.sum(stats.c.tokens).label("tokens")
    ).group_by(stats.c.term)
    before = {row.term: (row.docs, row.tokens) for row in conn.execute(summed)}
    conn.execute(sa.delete(stats))
    delta = Delta(conn, table)
    delta.add(sa.select(table.c.keywords, table.c.keyword_length), 1)
    delta.apply()
    after = {row.term: (row.docs, row.tokens) for row in conn.execute(summed)}
    unheld = {term for term, counts in before.items() if counts == (0, 0) and term not in after}
    if unheld:
        _log.info("recount of %s: %d terms no row holds taken out of the statistics", table.name, len(unheld))
    return sum(1 for term in (before.keys() - unheld) | after.keys() if before.get(term) != after.get(term))


def drifted_terms(conn: sa.Connection, table: sa.Table) -> int:
    """How many terms (the collection's total among them) ``count_rows`` would count otherwise than the statistics
    hold now; read only, in one statement, so the rows and the statistics are of one snapshot."""
    statement = sql.SQL(
        "WITH kept AS (SELECT term, sum(docs) AS docs, sum(tokens) AS tokens FROM {stats} GROUP BY term "
        "HAVING sum(docs) <> 0 OR sum(tokens) <> 0), "
        "counted AS (SELECT k AS term, count(*)::numeric AS docs, 0::numeric AS tokens "
        "FROM {rows}, jsonb_object_keys(keywords) AS k GROUP BY k "
        "UNION ALL SELECT {total}, count(*)::numeric, coalesce(sum(keyword_length), 0)::numeric FROM {rows} "
        "WHERE keyword_length > 0 HAVING count(*) > 0) "
        "SELECT count(*) FROM kept FULL JOIN counted USING (term) "
        "WHERE kept.docs IS DISTINCT FROM counted.docs OR kept.tokens IS DISTINCT FROM counted.tokens"
    ).format(stats=sql.Identifier(stats_table(table).name), rows=sql.Identifier(table.name), total=sql.Literal(TOTAL))
    found = driver(conn).execute(statement).fetchone()
    return int(found[0]) if found is not None else 0


def backfill(
    conn: sa.Connection, table: sa.Table, terms_of: Callable[[str], Counter[str]], *, page: int = BACKFILL_PAGE
) -> int:
    """Analyze every row's stored text again (no embedding is involved) and count the statistics anew; return
    how many rows. Pages of ``page`` rows by id, each written back with one COPY and one UPDATE."""
    raw = driver(conn)
    fill = sql.Identifier("vs_kwfill")
    raw.execute(
        sql.SQL(
            "CREATE TEMP TABLE IF NOT EXISTS {} (id text PRIMARY KEY, keywords jsonb, "
            "keyword_length int) ON COMMIT DROP"
        ).format(fill)
    )
    update = sql.SQL(
        "UPDATE {t} SET keywords = f.keywords, keyword_length = f.keyword_length FROM {f} AS f WHERE {t}.id = f.id"
    ).format(t=sql.Identifier(table.name), f=fill)
    done, last = 0, None
    while True:
        query = sa.select(table.c.id, table.c.text).order_by(table.c.id).limit(page)
        rows = conn.execute(query if last is None else query.where(table.c.id > last)).all()
        if not rows:
            break
        statement = sql.SQL("COPY {} FROM STDIN WITH (FORMAT BINARY)").format(fill)
        with raw.cursor() as cursor, cursor.copy(statement) as copy:
            copy.set_types(["text", "jsonb", "int4"])
            for row in rows:
                counts = terms_of(row.text)
                copy.write_row((row.id, Jsonb(dict(counts)), sum(counts.values())))
        raw.execute(update)
        raw.execute(sql.SQL("TRUNCATE {}").format(fill))
        done, last = done + len(rows), rows[-1].id
    count_rows(conn, table)
    return done


def statistics(conn: sa.Connection, table: sa.Table, terms: Sequence[str]) -> tuple[int, float, dict[str, int]]:
    """N, avgdl and each term's df, summed over the shards."""
    stats = stats_table(table)
    wanted = [TOTAL, *terms]
    rows = conn.execute(
        sa.select(stats.c.term, sa.func.sum(stats.c.docs), sa.func.sum(stats.c.tokens))
        .where(stats.c.term == sa.func.any(sa.cast(sa.literal(wanted), ARRAY(sa.Text))))
        .group_by(stats.c.term)
    ).all()
    found = {row[0]: (int(row[1]), int(row[2])) for row in rows}
    docs, tokens = found.pop(TOTAL, (0, 0))
    return docs, (tokens / docs if docs else 0.0), {term: df for term, (df, _) in found.items() if df > 0}


def ranked(
    conn: sa.Connection, table: sa.Table, terms: Sequence[str], *, where: Any, limit: int, cap: int | None = None
) -> list[Any] | None:
    """The ``limit`` rows matching ``where`` with the best BM25 score for ``terms``, best first, ties by id.

    With ``cap`` (the planner chose the exact path: the filter matches few rows), the filtered rows are taken
    first, through the filter's indexes, and scored there; None when more than ``cap`` match (hand over to the
    general query, which PostgreSQL plans from both GIN indexes).
    """
    n, avgdl, df = statistics(conn, table, terms)
    if not df:
        return []
    if cap is None:
        score, holds = keyword_query(table, terms, n=n, avgdl=avgdl, df=df)
        query = (
            sa.select(table.c.id, table.c.text, table.c.metadata, score.label("score"))
            .where(holds, where)
            .order_by(score.desc(), table.c.id)
            .limit(limit)
        )
        return list(conn.execute(query).all())
    # MATERIALIZED: the filter's rows first, whatever PostgreSQL guesses of the keyword condition.
    candidates = (
        sa.select(table.c.id, table.c.keywords, table.c.keyword_length)
        .where(where)
        .limit(cap + 1)
        .cte("candidates")
        .prefix_with("MATERIALIZED")
    )
    score, holds = keyword_query(candidates, terms, n=n, avgdl=avgdl, df=df)
    top = (
        sa.select(candidates.c.id, score.label("score"))
        .where(holds)
        .order_by(score.desc(), candidates.c.id)
        .limit(limit)
        .cte("top")
    )
    matched = sa.select(sa.func.count()).select_from(candidates).scalar_subquery()
    query = (
        sa.select(table.c.id, table.c.text, table.c.metadata, top.c.score, matched.label("matched"))
        .join_from(top, table, top.c.id == table.c.id)
        .order_by(top.c.score.desc(), table.c.id)
    )
    rows = list(conn.execute(query).all())
    return None if rows and rows[0].matched > cap else rows


def keyword_query(rows: Any, terms: Sequence[str], *, n: int, avgdl: float, df: dict[str, int]) -> tuple[Any, Any]:
    """The BM25 score of ``rows`` (a table or CTE with ``keywords`` and ``keyword_length``) for ``terms``, and the
    condition that a row holds one of them; every term, weight and statistic a bound parameter."""
    present = [t for t in terms if t in df]
    norm = bm25.K1 * (1 - bm25.B + bm25.B * sa.cast(rows.c.keyword_length, sa.Float) / avgdl)
    parts = []
    for term in present:
        tf = sa.func.coalesce(sa.cast(rows.c.keywords.op("->>")(sa.literal(term)), sa.Float), 0.0)
        parts.append(bm25.idf(df[term], n) * (tf * (bm25.K1 + 1) / (tf + norm)))  # as scoring.scores has it
    score = sum(parts[1:], parts[0]) if parts else sa.literal(0.0)
    holds = sa.cast(rows.c.keywords, JSONB).op("?|")(sa.cast(sa.literal(present), ARRAY(sa.Text)))
    return score, holds
