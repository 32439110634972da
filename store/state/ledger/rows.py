"""What a row of the ledger's tables becomes in the ledger's values, and what becomes a row (``postgres.py``'s
reads and writes; ``statements.py`` holds the statements)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

import store.state.ledger.rules as rules
from store.calls.spend import Spend
from store.state.clock import now
from store.state.ledger.base import Failure, LedgerEntry, Parked, RunProgress, RunStatus

__all__ = [
    "SPEND_COLUMNS",
    "entry_of",
    "failure_of",
    "parked_of",
    "parked_row",
    "progress_of",
    "spend_of",
    "spend_row",
]

#: The columns of ``vectorsync_spend`` a ``Spend`` holds, by the same names.
SPEND_COLUMNS = ("run_id", "collection", "model", "generation", "tokens", "calls", "cost", "counted_by")


def parked_row(parked: Parked) -> dict[str, Any]:
    """A parked batch as its row, parked now."""
    return {
        "run_id": parked.run_id,
        "batch": parked.batch,
        "collection": parked.collection,
        "ids": list(parked.ids),
        "carried": parked.carried,
        "fresh": parked.fresh,
        "parked_at": now(),
    }


def entry_of(row: sa.Row[Any]) -> LedgerEntry:
    """A ``vectorsync_ledger`` row as its entry."""
    return LedgerEntry(row.record_id, row.content_hash, row.model, row.chunks, row.version, row.stamp, row.indexed_at)


def progress_of(row: sa.Row[Any]) -> RunProgress:
    """A ``statements.RUN`` row as the run's progress (``rules.with_tally``)."""
    run = RunProgress(
        run_id=row.run_id,
        collection=row.collection,
        status=RunStatus(row.status),
        total=row.total,
        done=0,
        skipped=0,
        failed=0,
        full=row.full,
        started_at=row.started_at,
        finished_at=row.finished_at,
        error=row.error,
        kind=row.kind,
        max_tokens=row.max_tokens,
        max_cost=row.max_cost,
        lane=row.lane,
    )
    tally = rules.Tally(int(row.done), int(row.skipped), int(row.failed), int(row.counted), row.moved_at)
    return rules.with_tally(run, tally, batches=row.batches)


def parked_of(row: sa.Row[Any]) -> Parked:
    """A ``vectorsync_parked_batches`` row as its parked batch."""
    return Parked(
        run_id=row.run_id,
        batch=row.batch,
        collection=row.collection,
        ids=list(row.ids),
        carried=row.carried,
        fresh=row.fresh,
        parked_at=row.parked_at,
    )


def spend_row(spend: Spend) -> dict[str, Any]:
    """A spend as its ``vectorsync_spend`` row's values."""
    return {column: getattr(spend, column) for column in SPEND_COLUMNS}


def spend_of(row: sa.Row[Any]) -> Spend:
    """A ``vectorsync_spend`` row as its spend."""
    return Spend(**{column: getattr(row, column) for column in SPEND_COLUMNS})


def failure_of(row: sa.Row[Any]) -> Failure:
    """A ``vectorsync_failures`` row as its failure."""
    return Failure(row.collection, row.record_id, row.error, row.attempts, row.last_seen)
