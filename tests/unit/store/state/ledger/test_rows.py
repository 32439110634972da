"""The ledger's table rows as its values and back: every column read by name, a parked batch parked now."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from store.calls.spend import Spend
from store.contract import RunStatus
from store.state.ledger.base import Failure, LedgerEntry, Parked
from store.state.ledger.rows import (
    SPEND_COLUMNS,
    entry_of,
    failure_of,
    parked_of,
    parked_row,
    progress_of,
    spend_of,
    spend_row,
)
from store.state.tables import spend

WHEN = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def row(**columns: Any) -> Any:
    """A result row as the ledger reads it: columns by attribute."""
    return SimpleNamespace(**columns)


def test_an_entry_and_a_failure_are_read_from_their_rows() -> None:
    found = entry_of(row(record_id="a", content_hash="h", model="m", chunks=3, version=7, stamp="s", indexed_at=WHEN))
    assert found == LedgerEntry("a", "h", "m", 3, 7, "s") and found.indexed_at == WHEN
    failure = failure_of(row(collection="notes", record_id="b", error="boom", attempts=2, last_seen=WHEN))
    assert failure == Failure("notes", "b", "boom", 2, WHEN)


def test_a_run_s_progress_is_its_row_with_its_batches_summed() -> None:
    progress = progress_of(
        row(
            run_id="r",
            collection="notes",
            status="running",
            total=10,
            full=True,
            started_at=WHEN,
            finished_at=None,
            error="",
            kind="reconcile",
            max_tokens=100,
            max_cost=None,
            lane="batch",
            done=4,
            skipped=1,
            failed=0,
            counted=2,
            moved_at=WHEN,
            batches=3,
        )
    )
    assert (progress.status, progress.kind, progress.full, progress.max_tokens) == (
        RunStatus.RUNNING,
        "reconcile",
        True,
        100,
    )
    assert (progress.done, progress.skipped, progress.failed, progress.counted, progress.batches) == (4, 1, 0, 2, 3)
    assert progress.moved_at == WHEN
    assert progress.lane == "batch"


def test_a_parked_batch_goes_in_as_a_row_parked_now_and_comes_back_whole() -> None:
    parked = Parked(run_id="r", batch=2, collection="notes", ids=["1", "2"], carried={"x": 1}, fresh=True)
    stored = parked_row(parked)
    assert stored["parked_at"] > WHEN and stored["ids"] == ["1", "2"]
    back = parked_of(row(**stored))
    assert back == Parked(**{**stored, "ids": ["1", "2"]})  # type: ignore[arg-type]


def test_spend_travels_as_its_table_s_columns() -> None:
    assert set(SPEND_COLUMNS) == {c.name for c in spend.columns} - {"updated_at"}
    spent = Spend(run_id="r", collection="notes", model="m", generation=1, tokens=5, calls=1, cost=0.1, counted_by="x")
    assert spend_of(row(**spend_row(spent))) == spent
