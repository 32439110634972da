"""The reindex tasks: ``reindex_all`` fans a collection's changes out as batches of a run, a step at a time
(``worker.runs.fanout``), and ``build_index`` builds the vector index a bulk load deferred, then calls the run
done. A retry or a redelivery goes on with the run the first attempt began.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import Task
from celery.exceptions import Reject, SoftTimeLimitExceeded

from store.broker.config import soft_time_limit
from store.contract import BUILD_INDEX, REINDEX_ALL
from store.errors import ConfigError, StoreError, StoreUnavailable
from store.settings import Settings
from store.state.ledger import RunProgress
from store.vectors.records import check_collection_name
from worker.pipeline.sweeper import Sweeper
from worker.runs.budgets import caps_of
from worker.runs.fanout import FanOut, Step, count_run, fan_out, send_gone
from worker.runs.lane import send_look
from worker.runs.sending import ReindexStep, flush_when_due, run_finished, send_batch, send_build
from worker.runtime.app import app
from worker.runtime.context import context
from worker.runtime.delivery import delivered_again_if_unsent
from worker.tasks.retries import (
    RETRIED,
    DeliveredTooOften,
    again,
    check_redeliveries,
    message_run_id,
    retry_or_give_up,
)

__all__ = ["BUILD_WAIT_MARGIN", "BUILD_WAIT_SECONDS", "build_index", "reindex_all"]

log = logging.getLogger(__name__)

#: Seconds a build_index attempt keeps, before its time limit, to send itself again.
BUILD_WAIT_MARGIN = 10.0
#: Seconds one build_index attempt waits for its build at most: a worker shutting down waits no longer for it.
BUILD_WAIT_SECONDS = 60.0


@app.task(bind=True, name=REINDEX_ALL, **RETRIED)
def reindex_all(
    self: Task,
    collection: str,
    full: bool = False,
    run_id: str | None = None,
    allow_empty: bool = False,
    cursor: dict[str, Any] | None = None,
) -> str:
    """Fan what changed in a collection out as batch tasks on the bulk queue (``worker.runs.fanout``: a first
    load sends every id); with ``full``, drop records gone from the source. A source of more than
    ``worker.fanout_pages`` pages is fanned out in steps, each a reindex_all of the same run with the ``cursor``
    the last one left. A retry goes on with the same run (the message's id when its sender named none), fanning
    its step out again in full."""
    ctx = context()
    check_collection_name(collection)
    if cursor is None:
        run_id = ctx.ledger.create_run(collection, full=full, run_id=run_id or message_run_id(self))
    elif run_id is None:
        raise Reject(f"a fan-out step of {collection} without its run", requeue=False)
    step = ReindexStep(collection, run_id, full=full, allow_empty=allow_empty, cursor=cursor)
    try:
        run = ctx.ledger.run(run_id)
        if cursor is not None and run.status.ended:  # a paused run's steps go on, its batches parked
            log.info("reindex %s of %s ended before its fan-out did: its next step is dropped", run_id, collection)
            return run_id
        found, progress, pooled = _fan_out_step(self, step, run)
    except (StoreUnavailable, SoftTimeLimitExceeded) as exc:  # a step cut short fans out again, in full
        retry_or_give_up(self, exc, args=(collection,), kwargs=step.kwargs())
        ctx.ledger.fail_run(run_id, str(exc) or type(exc).__name__)
        log.error("reindex %s of %s failed: %s", run_id, collection, exc)
        return run_id
    except (ConfigError, StoreError, DeliveredTooOften) as exc:
        ctx.ledger.fail_run(run_id, str(exc))
        raise
    except Exception as exc:  # a bug: the run ends failed, saying what happened
        ctx.ledger.fail_run(run_id, f"{type(exc).__name__}: {exc}")
        raise
    if progress is None:  # its next step goes on
        return run_id
    with delivered_again_if_unsent(self):
        if progress.lane == "batch":
            send_look(run_id)  # every batch is out: the lane sends what they gathered once they are all in
        if pooled:
            flush_when_due(collection, progress)
        run_finished(collection, progress)
    log.info(
        "reindex %s of %s: %d records, %d unchanged, the rest in %d batches",
        run_id,
        collection,
        found.total,
        found.unchanged,
        found.batches,
    )
    return run_id


def _fan_out_step(self: Task, step: ReindexStep, run: RunProgress) -> tuple[FanOut, RunProgress | None, bool]:
    """One step of ``run``'s fan-out: what it found, the run's progress once the last step has counted it
    (None while a next step goes on), and whether the run is pooled."""
    ctx, collection, run_id = context(), step.collection, step.run_id
    check_redeliveries(self)
    sweeper = ctx.started(collection)
    if step.cursor is None:
        _first_step(collection, sweeper, run_id)
        start = FanOut()
    else:
        start = FanOut.resumed(step.cursor)
    # A capped run is not pooled: a pooled record waits in Redis outside its batch, which parking could
    # not put aside whole. Nor is a batch-lane run: its calls are the provider's jobs, filled whole.
    lane = "gather" if run.lane == "batch" else None
    pooled = ctx.leftovers() is not None and caps_of(run) == (None, None) and lane is None

    def sender(fresh: bool) -> Any:
        def sent(ids: list[str], batch: int) -> None:
            send_batch(collection, ids, run_id=run_id, batch=batch, pooled=pooled, fresh=fresh, lane=lane)

        return sent

    batch_size = ctx.settings.worker.batch_size
    found = fan_out(
        sweeper,
        batch_size=batch_size,
        changed_only=not again(self),
        send=sender(False),
        fresh=sender(True),
        step=Step(start, ctx.settings.worker.fanout_pages),
    )
    if not found.finished:
        step.send_next(found.cursor())
        return found, None, pooled
    if step.full:
        send_gone(collection, sweeper, found, batch_size=batch_size, send=sender(False), allow_empty=step.allow_empty)
    return found, count_run(ctx.ledger, run_id, found, pooled=pooled), pooled


def _first_step(collection: str, sweeper: Sweeper, run_id: str) -> None:
    """What only a reindex's first step does: refuse a pushed collection, forget a ledger whose collection was
    lost, and defer the vector index of an empty collection until every record is in."""
    sweeper.pipeline.source.page_ids(after=None, limit=1)  # a pushed collection has nothing to read: refuse first
    sweeper.forget_if_lost()
    if sweeper.pipeline.collection.defer_index():
        context().ledger.defer_index(run_id)
        log.info("%s is empty: its vector index is built once every record is in", collection)


@app.task(bind=True, name=BUILD_INDEX, **RETRIED)
def build_index(self: Task, collection: str, run_id: str, started: float | None = None) -> str:
    """Build the vector index a bulk load deferred (a no-op when it exists), then call the run done. The task
    waits for the build only until shortly before its own time limit, then sends itself again: the build goes
    on in PostgreSQL, and the next attempt waits for it rather than start another. ``started``: when the run's
    build began; ``worker.index_time_limit`` seconds after it, the build is cancelled and the run fails."""
    until = time.monotonic() + _wait_seconds(context().settings)
    ctx, started = context(), started or time.time()
    limit = ctx.settings.worker.index_time_limit
    try:
        check_redeliveries(self)
        built = ctx.pipeline(collection).collection.build_index(until=until, deadline=started + limit, limit=limit)
    except StoreUnavailable as exc:
        retry_or_give_up(self, exc, args=(collection, run_id), kwargs={"started": started})
        ctx.ledger.fail_run(run_id, f"the vector index could not be built: {exc}")
        return "failed"
    except StoreError as exc:  # past its limit, or refused: retrying would build it again to the same end
        ctx.ledger.fail_run(run_id, str(exc))
        log.error("run %s of %s failed: %s", run_id, collection, exc)
        return "failed"
    except Exception as exc:
        ctx.ledger.fail_run(run_id, f"the vector index could not be built: {type(exc).__name__}: {exc}")
        raise
    with delivered_again_if_unsent(self):
        if not built:
            log.info("the index build of %s (run %s) goes on: waiting for it again", collection, run_id)
            send_build(collection, run_id, started=started)
            return "indexing"
        progress = ctx.ledger.complete_run(run_id)
        run_finished(collection, progress)
    return str(progress.status)


def _wait_seconds(settings: Settings) -> float:
    """How long one ``build_index`` waits for its build: ``BUILD_WAIT_SECONDS``, and up to its soft time limit
    (or its hard one) less ``BUILD_WAIT_MARGIN`` seconds for sending itself again (half the limit at most)."""
    limit = soft_time_limit(settings.worker.time_limit, settings) or settings.worker.time_limit
    return min(BUILD_WAIT_SECONDS, limit - min(BUILD_WAIT_MARGIN, limit / 2))
