"""The run and failure gauges a worker's metrics endpoint reads from the ledger at each scrape
(worker/metrics/gauges.py).

Scraped from a real worker: tests/integration/deploy/test_observability.py.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from store.state.ledger import Ledger, MemoryLedger, Overview, RunProgress, RunStatus
from worker.metrics.gauges import LedgerGauges, run_gauges

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def progress(
    collection: str, *, idle: float, status: RunStatus = RunStatus.RUNNING, total: int | None = 10, done: int = 4
) -> RunProgress:
    return RunProgress(
        run_id=f"{collection}-{idle}",
        collection=collection,
        status=status,
        total=total,
        done=done,
        skipped=1,
        failed=0,
        full=False,
        started_at=NOW - timedelta(seconds=idle + 60),
        finished_at=None,
        moved_at=NOW - timedelta(seconds=idle),
    )


def test_open_runs_give_each_collection_its_longest_idle_time_and_its_newest_runs_progress() -> None:
    overview = Overview(
        runs={RunStatus.RUNNING: 3, RunStatus.INDEXING: 1, RunStatus.DONE: 7, RunStatus.FAILED: 2},
        open_runs=[
            progress("notes", idle=5),
            progress("notes", idle=400, done=9),  # newest first
            progress("docs", idle=30, total=None),
            progress("big", idle=900, status=RunStatus.INDEXING),
        ],
        failures={"notes": 3},
    )
    values = run_gauges(overview, now=NOW)
    assert values["vectorsync_runs"] == {"running": 3.0, "indexing": 1.0, "done": 7.0, "failed": 2.0, "paused": 0.0}
    assert values["vectorsync_run_idle_seconds"] == {"notes": 400.0, "docs": 30.0}  # an index build is not idle
    assert values["vectorsync_run_progress"] == {"notes": 0.5}  # the newest notes run: (4 + 1) / 10; docs: no total
    assert values["vectorsync_failed_records"] == {"notes": 3.0}


def _samples(collector: LedgerGauges) -> dict[str, list[tuple[dict[str, str], float]]]:
    return {family.name: [(s.labels, s.value) for s in family.samples] for family in collector.collect()}


def test_a_ledger_that_fails_leaves_the_gauges_empty_and_is_opened_again_at_the_next_scrape() -> None:
    class Broken(MemoryLedger):
        def overview(self) -> Overview:
            raise ConnectionError("the state database is gone")

    working = MemoryLedger()
    working.create_run("notes")
    ledgers: list[Ledger] = [Broken(), working]
    collector = LedgerGauges(lambda: ledgers.pop(0))
    assert _samples(collector) == {
        "vectorsync_runs": [],
        "vectorsync_run_idle_seconds": [],
        "vectorsync_run_progress": [],
        "vectorsync_failed_records": [],
    }
    again = _samples(collector)
    assert ledgers == [] and ({"status": "running"}, 1.0) in again["vectorsync_runs"]
    assert [labels for labels, _ in again["vectorsync_run_idle_seconds"]] == [{"collection": "notes"}]


def test_each_declared_collection_and_run_state_has_its_series_before_anything_happened() -> None:
    """Series from the first scrape: 0 runs and failed records; NaN, not a misleading 0, for the idle time and
    progress of a collection with no running run."""
    overview = Overview(runs={RunStatus.RUNNING: 1}, open_runs=[progress("notes", idle=400)], failures={})
    values = run_gauges(overview, now=NOW, collections=("notes", "docs"))
    assert values["vectorsync_runs"] == {"running": 1.0, "indexing": 0.0, "done": 0.0, "failed": 0.0, "paused": 0.0}
    assert values["vectorsync_failed_records"] == {"notes": 0.0, "docs": 0.0}
    assert values["vectorsync_run_idle_seconds"]["notes"] == 400.0
    assert values["vectorsync_run_progress"]["notes"] == 0.5
    assert math.isnan(values["vectorsync_run_idle_seconds"]["docs"])
    assert math.isnan(values["vectorsync_run_progress"]["docs"])


def test_a_fresh_ledger_gives_every_declared_collection_its_series() -> None:
    samples = _samples(LedgerGauges(MemoryLedger, collections=("notes",)))
    assert samples["vectorsync_failed_records"] == [({"collection": "notes"}, 0.0)]
    assert [labels for labels, _ in samples["vectorsync_run_progress"]] == [{"collection": "notes"}]
    assert len(samples["vectorsync_runs"]) == len(RunStatus)
