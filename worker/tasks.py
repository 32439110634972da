"""The tasks. Each is idempotent: running one twice, or two at once, leaves the same index.

Payloads are small and JSON-plain: a collection name and record ids (or one pushed document). A batch whose
provider calls keep failing is retried with backoff for the records that failed; after its retries they go to
the failures table, and the rest of the batch is indexed regardless (``worker.flow``).
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any, Unpack

from celery import Task
from celery.exceptions import Reject, Retry, SoftTimeLimitExceeded

from store.broker.config import soft_time_limit
from store.contract import (
    BUILD_INDEX,
    INDEX_BATCH,
    INDEX_DOCUMENT,
    INDEX_RECORD,
    POOL_BATCH,
    RECONCILE,
    REINDEX_ALL,
    BatchMessage,
)
from store.errors import ConfigError, StoreError, StoreUnavailable
from store.retrieval.options import refuse_unknown
from store.settings import Settings
from store.state.ledger import RunProgress
from store.vectors.records import check_collection_name
from worker.batches import Document
from worker.budgets import caps_of
from worker.celery import app
from worker.delivery import RedeliveredTask, delivered_again_if_unsent
from worker.fanout import FanOut, Step, count_run, fan_out, send_gone
from worker.flow import Batch, Work, process
from worker.pipeline import Indexer
from worker.pooling.batches import PoolBatch, PooledBatch
from worker.process import context
from worker.pushed import Pushed, is_pushed, send_lost
from worker.retries import DeliveredTooOften, again, check_redeliveries, message_run_id, retry_or_give_up, task_policy
from worker.runs import ReindexStep, flush_when_due, run_finished, send_batch, send_build
from worker.sweeps import yielded_to

__all__ = ["build_index", "index_batch", "index_document", "index_record", "reconcile", "reindex_all"]

log = logging.getLogger(__name__)

#: Seconds a build_index attempt keeps, before its time limit, to send itself again.
BUILD_WAIT_MARGIN = 10.0
#: Seconds one build_index attempt waits for its build at most: a worker shutting down waits no longer for it.
BUILD_WAIT_SECONDS = 60.0

#: Every task: a backend that cannot be reached where no finer rule applies (building this process's context,
#: opening a run) retries the task with backoff, never loses it.
_RETRIED: dict[str, Any] = {
    "max_retries": None,
    "autoretry_for": (StoreUnavailable,),
    "retry_backoff": True,
    "retry_backoff_max": 60,
    "base": RedeliveredTask,
}


@app.task(bind=True, name=INDEX_RECORD, **_RETRIED)
def index_record(self: Task, collection: str, record_id: str) -> dict[str, int]:
    """Bring one record's chunks in line with its source (live queue)."""
    if not self.request.retries:
        context().coalescer.release(collection, str(record_id))
    return process(self, Work(Batch(collection, [str(record_id)])))


@app.task(bind=True, name=INDEX_BATCH, **_RETRIED)
def index_batch(self: Task, collection: str, ids: list[str], **message: Unpack[BatchMessage]) -> dict[str, int]:
    """Index a batch of record ids (bulk queue); counted once in its run. ``message``: the run's part of it
    (``BatchMessage``, its defaults applied here). ``pooled``: the run has a leftover pool (``worker.pooling``),
    so the batch makes only full provider calls; batch ``POOL_BATCH`` empties it. ``fresh``: the ledger held
    none of the ids when the fan-out looked, so a first attempt does not read it (``Indexer.index``)."""
    refuse_unknown("index_batch", message, BatchMessage.__optional_keys__)
    run_id, batch, pooled = message.get("run_id"), message.get("batch"), message.get("pooled", False)
    work = Batch(collection, [str(i) for i in ids], run_id, batch, message.get("carried"), pooled)
    fresh = message.get("fresh", False) and not again(self)
    pool = context().leftovers() if pooled and run_id is not None and batch is not None else None
    if pool is None:
        return process(self, Work(work, fresh=fresh))
    if batch == POOL_BATCH:
        return process(self, PoolBatch(work, pool, final=not task_policy(self).may_retry(self.request.retries)))
    return process(self, PooledBatch(work, pool, fresh=fresh))


@app.task(bind=True, name=INDEX_DOCUMENT, **_RETRIED)
def index_document(
    self: Task, collection: str, id: str, text: str | None, metadata: dict[str, Any] | None = None, version: int = 0
) -> dict[str, int]:
    """Index a document pushed with its content; ``text=None`` deletes it. Its copy kept in Redis goes once done."""
    work = Pushed(collection, Document(str(id), text or "", metadata or {}, version), deleted=text is None)
    try:
        counts = process(self, work)
    except (Retry, Reject):  # it runs again (a retry, or its message back in the queue): its copy stays kept
        raise
    except Exception:  # no attempt will do better: sending it again from a sweep would fail the same way
        work.settle()
        raise
    work.settle()
    return counts


@app.task(bind=True, name=REINDEX_ALL, **_RETRIED)
def reindex_all(
    self: Task,
    collection: str,
    full: bool = False,
    run_id: str | None = None,
    allow_empty: bool = False,
    cursor: dict[str, Any] | None = None,
) -> str:
    """Fan what changed in a collection out as batch tasks on the bulk queue (``worker.fanout``: a first
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
    indexer = ctx.started(collection)
    if step.cursor is None:
        _first_step(collection, indexer, run_id)
        start = FanOut()
    else:
        start = FanOut.resumed(step.cursor)
    # A capped run is not pooled: a pooled record waits in Redis outside its batch, which parking could
    # not put aside whole.
    pooled = ctx.leftovers() is not None and caps_of(run) == (None, None)

    def sender(fresh: bool) -> Any:
        return lambda ids, batch: send_batch(collection, ids, run_id=run_id, batch=batch, pooled=pooled, fresh=fresh)

    batch_size = ctx.settings.worker.batch_size
    found = fan_out(
        indexer,
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
        send_gone(collection, indexer, found, batch_size=batch_size, send=sender(False), allow_empty=step.allow_empty)
    return found, count_run(ctx.ledger, run_id, found, pooled=pooled), pooled


def _first_step(collection: str, indexer: Indexer, run_id: str) -> None:
    """What only a reindex's first step does: refuse a pushed collection, forget a ledger whose collection was
    lost, and defer the vector index of an empty collection until every record is in."""
    indexer.source.page_ids(after=None, limit=1)  # a pushed collection has nothing to read: refuse first
    indexer.forget_if_lost()
    if indexer.collection.defer_index():
        context().ledger.defer_index(run_id)
        log.info("%s is empty: its vector index is built once every record is in", collection)


@app.task(bind=True, name=BUILD_INDEX, **_RETRIED)
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
        built = ctx.indexer(collection).collection.build_index(until=until, deadline=started + limit, limit=limit)
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


@app.task(bind=True, name=RECONCILE, **_RETRIED)
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
            send_batch(collection, ids, run_id=run_id, batch=number)
    except StoreUnavailable as exc:  # the batches sent are indexed all the same; the next sweep sends the rest
        with contextlib.suppress(StoreUnavailable):
            ctx.ledger.fail_run(run_id, f"batch {number} of {len(pages)} could not be sent: {exc}")
        log.warning("reconcile %s of %s sent %d of %d batches: %s", run_id, collection, number, len(pages), exc)
    return run_id


def _stale_pages(collection: str, run_id: str) -> list[list[str]]:
    """The sweep's batches, its total written: none while an older run of the collection is at work."""
    ctx, size = context(), context().settings.worker.batch_size
    indexer = ctx.started(collection)
    busy = yielded_to(collection, run_id)
    if busy:  # its batches may still wait in the queue: enqueuing them again would only grow the backlog
        log.info("reconcile %s of %s skipped: run %s is still at work", run_id, collection, busy[0].run_id)
        ctx.ledger.set_run_total(run_id, total=0, batches=0)
        return []
    indexer.forget_if_lost()
    stale = indexer.stale(page_size=size)
    pages = [stale[start : start + size] for start in range(0, len(stale), size)]
    ctx.ledger.set_run_total(run_id, total=len(stale), batches=len(pages))
    log.info("reconcile %s of %s: %d records to index", run_id, collection, len(stale))
    return pages
