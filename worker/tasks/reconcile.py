"""The reconcile sweep: the source compared with the ledger, and what is missing, changed or gone enqueued as
batches of a run; a pushed collection's lost pushes sent again. Celery beat sends it per collection.
"""

from __future__ import annotations

import contextlib
import logging

from celery import Task

from store.contract import RECONCILE
from store.errors import StoreUnavailable
from store.state.generations import parse_name
from worker.repair.sweeps import yielded_to
from worker.runs.lane import send_look
from worker.runs.sending import send_batch
from worker.runtime.app import app
from worker.runtime.context import context
from worker.tasks.documents import is_pushed, send_lost
from worker.tasks.retries import RETRIED, check_redeliveries, message_run_id, retry_or_give_up

__all__ = ["reconcile"]

log = logging.getLogger(__name__)


@app.task(bind=True, name=RECONCILE, **RETRIED)
def reconcile(self: Task, collection: str, run_id: str | None = None) -> str:
    """Compare the source with the ledger; enqueue what is missing, changed or gone.

    Heals lost messages (a Redis restart without persistence, a flushed queue):
    Celery beat runs it per collection every ``worker.reconcile_seconds``. The run's total is written before
    any batch is sent, so a retry (of the same run, whose id is the message's when beat sent none) starts from
    nothing sent, and a message delivered again after batches went out ends the run rather than count anew.
    """
    ctx = context()
    run_id = ctx.ledger.create_run(collection, run_id=run_id or message_run_id(self), kind="reconcile")
    begun = ctx.ledger.run(run_id)
    lane = begun.lane
    declared = ctx.settings.collections.get(parse_name(collection)[0])
    if declared is not None and declared.lane == "batch" and lane != "batch":  # started by beat: no producer set it
        ctx.ledger.set_lane(run_id, "batch")
        lane = "batch"
    if begun.status.ended or begun.total is not None:  # delivered again after an attempt that sent batches
        if not begun.status.ended:
            ctx.ledger.fail_run(
                run_id, "its worker stopped while it sent its batches; the next sweep sends what is still stale"
            )
        return run_id
    try:
        check_redeliveries(self)
        if is_pushed(collection):  # no source to compare with: the pushes a worker never took are sent again
            ctx.ledger.set_run_total(run_id, total=send_lost(collection), batches=0)
            return run_id
        pages = _stale_pages(collection, run_id)
    except StoreUnavailable as exc:  # retried with backoff, as the same run: the sweep goes on once it is back
        retry_or_give_up(self, exc, args=(collection,), kwargs={"run_id": run_id})
        with contextlib.suppress(StoreUnavailable):  # else lost-run closing ends it; the next sweep starts afresh
            ctx.ledger.fail_run(run_id, str(exc))
        return run_id
    except Exception as exc:  # the sweep ends failed, saying why; the next one starts afresh
        ctx.ledger.fail_run(run_id, f"{type(exc).__name__}: {exc}")
        raise
    number = 0
    try:
        for number, ids in enumerate(pages):
            send_batch(collection, ids, run_id=run_id, batch=number, lane="gather" if lane == "batch" else None)
        if lane == "batch" and pages:
            send_look(run_id)
    except StoreUnavailable as exc:  # the batches sent are indexed all the same; the next sweep sends the rest
        with contextlib.suppress(StoreUnavailable):
            ctx.ledger.fail_run(run_id, f"batch {number} of {len(pages)} could not be sent: {exc}")
        log.warning("reconcile %s of %s sent %d of %d batches: %s", run_id, collection, number, len(pages), exc)
    return run_id


def _stale_pages(collection: str, run_id: str) -> list[list[str]]:
    """The sweep's batches, its total written: none while an older run of the collection is at work."""
    ctx, size = context(), context().settings.worker.batch_size
    sweeper = ctx.started(collection)
    busy = yielded_to(collection, run_id)
    if busy:  # its batches may still wait in the queue: enqueuing them again would only grow the backlog
        log.info("reconcile %s of %s skipped: run %s is still at work", run_id, collection, busy[0].run_id)
        ctx.ledger.set_run_total(run_id, total=0, batches=0)
        return []
    sweeper.forget_if_lost()
    stale = sweeper.stale(page_size=size)
    pages = [stale[start : start + size] for start in range(0, len(stale), size)]
    ctx.ledger.set_run_total(run_id, total=len(stale), batches=len(pages))
    log.info("reconcile %s of %s: %d records to index", run_id, collection, len(stale))
    return pages
