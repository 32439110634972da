"""The reconcile sweep's view of a collection's other runs: which of them lost their tasks, and whether one is
still at work, so that sweeps never pile up.

A sweep enqueues every record whose source and ledger disagree. Behind a backlog (after a TRUNCATE, say) the
sweeps Celery beat sends every ``worker.reconcile_seconds`` waited in the queue and then ran back to back,
each enqueuing the same thousands of records again while the batches of the one before still waited: the
backlog grew faster than workers drained it (a 30-minute chaos run never settled). A sweep now ends at once
while another run of its collection is at work; a run that lost its tasks is closed first, so it blocks no
sweep for long.

A run is at work while its batches are out (it has a total) or its fan-out moved within
``worker.stall_seconds``. A fan-out that has counted nothing for longer lost its task or waits on a retry, and
may stay so for as long as the broker's visibility timeout: the sweep does not wait on it (its batches and the
fan-out's are the same idempotent work), or rows a TRUNCATE emptied stay searchable meanwhile (chaos seed 11).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from store.broker.queues import queue_states, worker_states
from store.contract import BULK_QUEUE
from store.state.generations import parse_name
from store.state.ledger import RunProgress
from worker.runtime.app import app
from worker.runtime.context import context

__all__ = ["at_work", "close_lost_runs", "older_than", "running_runs", "yielded_to"]

log = logging.getLogger(__name__)


#: Runs still ``running`` a sweep looks at, newest first: however old (one lost long ago must be found too).
RUNNING_LIMIT = 1000


def running_runs(collection: str, current: str) -> list[RunProgress]:
    """The runs of ``collection`` (any generation) other than ``current`` that are still ``running``."""
    return [
        r
        for r in context().ledger.recent_runs(RUNNING_LIMIT, running=True)
        if parse_name(r.collection)[0] == collection and r.run_id != current
    ]


def at_work(run: RunProgress, *, now: datetime, stall: float) -> bool:
    """Whether a sweep yields to ``run``: its batches are out, or it moved within ``stall`` seconds."""
    return run.total is not None or (now - (run.moved_at or run.started_at)).total_seconds() <= stall


def older_than(runs: list[RunProgress], current: str) -> list[RunProgress]:
    """Those of ``runs`` that started before ``current``: of sweeps started together the first goes on (each
    yielding to all the others, none did)."""
    if not runs:
        return []
    mine = context().ledger.run(current)
    return [r for r in runs if (r.started_at, r.run_id) < (mine.started_at, mine.run_id)]


def close_lost_runs(collection: str, current: str) -> list[RunProgress]:
    """End the runs of ``collection`` whose tasks were lost (a broker restarted without persistence): no
    progress for ``worker.stall_seconds``, nothing queued, nothing running but this sweep, which brings the
    index back in line. A run that may still be working is left alone. Returns the runs still running."""
    ctx = context()
    now, stall = datetime.now(UTC), ctx.settings.worker.stall_seconds
    running = running_runs(collection, current)
    idle = [r for r in running if (now - (r.moved_at or r.started_at)).total_seconds() > stall]
    if not idle:
        return running
    try:
        workers = worker_states(app, timeout=1.0)
        [bulk] = queue_states(ctx.settings.broker.url, (BULK_QUEUE,), workers)
    except Exception as exc:  # the broker cannot be asked: close nothing
        log.warning("could not look for lost runs of %s: %s", collection, exc)
        return running
    if bulk.depth or sum(w.active for w in workers) > 1:  # this sweep is one of the active tasks
        return running
    for run in idle:
        log.warning("run %s of %s lost its tasks; reconcile %s takes over", run.run_id, collection, current)
        ctx.ledger.fail_run(
            run.run_id,
            f"its tasks were lost (nothing queued or running, no progress for "
            f"{stall}s or more); reconcile {current} brought the index back in line",
        )
    return [r for r in running if r not in idle]


def yielded_to(collection: str, current: str) -> list[RunProgress]:
    """The runs of ``collection`` the sweep ``current`` yields to: older ones at work, once lost ones are closed."""
    now, stall = datetime.now(UTC), context().settings.worker.stall_seconds
    return [r for r in older_than(close_lost_runs(collection, current), current) if at_work(r, now=now, stall=stall)]
