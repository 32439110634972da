"""Filtered search on pgvector: an exact distance sort when the filter matches few rows, HNSW otherwise.

HNSW with a selective filter loses recall (the graph walk finds too few
matching neighbours); sorting a few thousand matching rows by distance is
exact and faster. So a filtered search first counts the matching rows, up to
``exact_rows + 1``, through the GIN or btree indexes the filter compiles to.
At or below the bound it sorts those rows exactly; above it, it walks the HNSW
index with iterative scans. Either way the caller gets the same kind of answer;
the plan and the count are logged at DEBUG and counted in metrics.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa

__all__ = ["Plan", "exact_search", "observe", "plan"]

log = logging.getLogger("vectorsync.search")

#: Turns a distance (SQL expression or number) into the score callers see.
Score = Callable[[Any], Any]


@dataclass(frozen=True)
class Plan:
    """How a filtered search ran: ``exact`` over ``matched`` rows, or ``hnsw`` (``matched`` > the bound)."""

    path: Literal["exact", "hnsw"]
    matched: int


def plan(conn: sa.Connection, table: sa.Table, where: sa.ColumnElement[bool], *, exact_rows: int) -> Plan:
    """Count the rows ``where`` matches, stopping past ``exact_rows``: exact at or below it, else HNSW.

    The count reads only the rows the filter's indexes point at (or scans until the bound when none can
    serve it), so its cost is bounded by ``exact_rows`` whatever the table's size.
    """
    matching = sa.select(sa.literal(1)).select_from(table).where(where).limit(exact_rows + 1).subquery()
    count = conn.execute(sa.select(sa.func.count()).select_from(matching)).scalar_one()
    return Plan("exact" if count <= exact_rows else "hnsw", count)


def exact_search(
    conn: sa.Connection, table: sa.Table, *, where: sa.ColumnElement[bool], distance: Any, score: Score,
    limit: int, exact_rows: int,
) -> list[Any]:
    """The ``limit`` rows matching ``where`` nearest by ``distance``, sorted exactly (no index walk)."""
    # MATERIALIZED keeps PostgreSQL from answering the ORDER BY with the HNSW index: this sort is exact.
    candidates = (
        sa.select(table.c.id, distance.label("distance")).where(where).limit(exact_rows + 1)
        .cte("candidates").prefix_with("MATERIALIZED")
    )
    top = sa.select(candidates.c.id, candidates.c.distance).order_by(candidates.c.distance).limit(limit).cte("top")
    query = (
        sa.select(table.c.id, table.c.text, table.c.metadata, score(top.c.distance).label("score"))
        .join_from(top, table, top.c.id == table.c.id)
        .order_by(top.c.distance, table.c.id)
    )
    return list(conn.execute(query).all())


_metrics: tuple[Any, Any] | None = None
_lock = threading.Lock()


def _made() -> tuple[Any, Any]:
    global _metrics
    with _lock:  # searches run in threads; a metric registered twice is an error of prometheus_client's
        if _metrics is None:
            from prometheus_client import Counter, Histogram

            _metrics = (
                Counter("vectorsync_search_plans", "Filtered searches by the path they took", ["collection", "plan"]),
                Histogram("vectorsync_search_filter_rows", "Rows a search filter matched (counted up to the "
                          "exact-search bound, plus one)", ["collection"],
                          buckets=(0, 10, 100, 1_000, 5_000, 10_000, 50_000, 100_000, float("inf"))),
            )
        return _metrics


def observe(collection: str, plan: Plan, *, exact_rows: int) -> None:
    """Log the plan at DEBUG and count it."""
    log.debug("search %s: filter matched %s rows (bound %d): %s path", collection,
              f"more than {exact_rows}" if plan.path == "hnsw" else plan.matched, exact_rows, plan.path)
    plans, rows = _made()
    plans.labels(collection=collection, plan=plan.path).inc()
    rows.labels(collection=collection).observe(plan.matched)
