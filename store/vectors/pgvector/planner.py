"""Filtered search on pgvector: an exact distance sort when the filter matches few rows, HNSW otherwise.

HNSW with a selective filter loses recall (the graph walk finds too few
matching neighbours); sorting a few thousand matching rows by distance is
exact and faster. So a filtered search first estimates how many rows match,
cheaply (``plan``). When they are few (a small share of the table, at most
``exact_rows``), it takes them through the GIN or btree indexes the filter
compiles to and sorts them exactly; otherwise it walks the HNSW index with
iterative scans, which keeps full recall when the filter keeps much of the table. Either way the caller gets
the same kind of answer; the plan and the estimate are logged at DEBUG and
counted in metrics.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.sql import util as sql_util

__all__ = [
    "ALWAYS_EXACT_ROWS",
    "HNSW_SHARE",
    "OVERSHOOT",
    "PATHS",
    "SAMPLE_ROWS",
    "Plan",
    "Ranking",
    "choose_path",
    "exact_search",
    "observe",
    "plan",
    "plan_metrics",
]

log = logging.getLogger("vectorsync.search")

#: Turns a distance (SQL expression or number) into the score callers see.
Score = Callable[[Any], Any]


#: A filter matching at most this many rows is always sorted exactly: that costs a few milliseconds.
ALWAYS_EXACT_ROWS = 2_000
#: A filter keeping at least this share of the table is left to HNSW, whose iterative scan finds its
#: neighbours with full recall there, faster than sorting that many rows (measured in bench/).
HNSW_SHARE = 0.05
#: Rows a selectivity estimate samples (whole pages, TABLESAMPLE SYSTEM): a few milliseconds at any size.
SAMPLE_ROWS = 2_000
#: An estimate may be low: the exact path sorts up to this many times the bound, else it hands over to HNSW.
OVERSHOOT = 3
#: Every path a filtered search may take: the ``plan`` label of ``vectorsync_search_plans_total``.
PATHS = ("exact", "hnsw")


@dataclass(frozen=True)
class Plan:
    """How a filtered search runs: ``exact`` or ``hnsw``, from an ``estimate`` of the rows the filter matches.

    ``source`` says where the estimate comes from: ``table`` (the whole table is small enough), ``sample``
    (a page sample), ``count`` (a count stopped past the bound: the table was never analyzed) or
    ``overshoot`` (the exact path found more rows than the estimate allowed for, and handed over).
    """

    path: Literal["exact", "hnsw"]
    estimate: int
    source: Literal["table", "sample", "count", "overshoot"]


def plan(conn: sa.Connection, table: sa.Table, where: sa.ColumnElement[bool], *, exact_rows: int) -> Plan:
    """Choose the path for ``where``: exact when it matches few rows (at most ``ALWAYS_EXACT_ROWS``, or a
    small share of the table up to ``exact_rows``), else HNSW.

    The estimate costs a few milliseconds whatever the table's size: the table's row count from the
    catalog, then the share of a page sample that matches.
    """
    rows = conn.execute(
        sa.text("SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(:t)"), {"t": table.name}
    ).scalar_one_or_none()
    if rows is not None and 0 <= rows <= min(ALWAYS_EXACT_ROWS, exact_rows):
        return Plan("exact", int(rows), "table")
    if rows is None or rows < 0:  # never analyzed: count, stopping past the bound
        matching = sa.select(sa.literal(1)).select_from(table).where(where).limit(exact_rows + 1).subquery()
        count = conn.execute(sa.select(sa.func.count()).select_from(matching)).scalar_one()
        return Plan("exact" if count <= exact_rows else "hnsw", count, "count")
    sample = sa.tablesample(table, sa.func.system(min(100.0, 100.0 * SAMPLE_ROWS / rows)), name="sample")
    sampled_where = sql_util.ClauseAdapter(sample).traverse(where)
    sampled, matched = conn.execute(sa.select(sa.func.count(), sa.func.count().filter(sampled_where))).one()
    estimate = round(matched / sampled * rows) if sampled else 0
    return Plan(choose_path(estimate, rows, exact_rows), estimate, "sample")


def choose_path(estimate: int, rows: int, exact_rows: int) -> Literal["exact", "hnsw"]:
    """Exact for few rows; HNSW for a large share of the table (full recall there) or beyond the bound."""
    if estimate <= min(ALWAYS_EXACT_ROWS, exact_rows):
        return "exact"
    return "hnsw" if estimate > exact_rows or estimate >= HNSW_SHARE * rows else "exact"


@dataclass(frozen=True)
class Ranking:
    """How a search ranks rows: by ``distance`` (an SQL expression, lower is nearer), shown as ``score(distance)``."""

    distance: Any
    score: Score


def exact_search(
    conn: sa.Connection,
    table: sa.Table,
    *,
    where: sa.ColumnElement[bool],
    ranking: Ranking,
    limit: int,
    exact_rows: int,
) -> list[Any] | None:
    """The ``limit`` rows matching ``where`` nearest by ``ranking``, sorted exactly (no index walk).

    None when more than ``OVERSHOOT * exact_rows`` rows match: the estimate was low, and HNSW is the way.
    """
    distance, score = ranking.distance, ranking.score
    cap = OVERSHOOT * exact_rows
    # MATERIALIZED keeps PostgreSQL from answering the ORDER BY with the HNSW index: this sort is exact.
    candidates = (
        sa.select(table.c.id, distance.label("distance"))
        .where(where)
        .limit(cap + 1)
        .cte("candidates")
        .prefix_with("MATERIALIZED")
    )
    top = sa.select(candidates.c.id, candidates.c.distance).order_by(candidates.c.distance).limit(limit).cte("top")
    matched = sa.select(sa.func.count()).select_from(candidates).scalar_subquery()
    query = (
        sa.select(
            table.c.id, table.c.text, table.c.metadata, score(top.c.distance).label("score"), matched.label("matched")
        )
        .join_from(top, table, top.c.id == table.c.id)
        .order_by(top.c.distance, table.c.id)
    )
    rows = list(conn.execute(query).all())
    return None if rows and rows[0].matched > cap else rows


_metrics: tuple[Any, Any] | None = None
_lock = threading.Lock()


def plan_metrics() -> tuple[Any, Any]:
    """``vectorsync_search_plans`` and ``vectorsync_search_filter_rows``, made once in this process."""
    global _metrics
    with _lock:  # searches run in threads; a metric registered twice is an error of prometheus_client's
        if _metrics is None:
            from prometheus_client import Counter, Histogram

            _metrics = (
                Counter("vectorsync_search_plans", "Filtered searches by the path they took", ["collection", "plan"]),
                Histogram(
                    "vectorsync_search_filter_rows",
                    "Rows a search filter was estimated to match",
                    ["collection"],
                    buckets=(0, 10, 100, 1_000, 5_000, 10_000, 50_000, 100_000, 1_000_000, float("inf")),
                ),
            )
        return _metrics


def observe(collection: str, plan: Plan, *, exact_rows: int) -> None:
    """Log the plan at DEBUG and count it."""
    log.debug(
        "search %s: filter matches about %d rows (%s; bound %d): %s path",
        collection,
        plan.estimate,
        plan.source,
        exact_rows,
        plan.path,
    )
    plans, rows = plan_metrics()
    plans.labels(collection=collection, plan=plan.path).inc()
    rows.labels(collection=collection).observe(plan.estimate)
