"""The tasks. Each is idempotent: running one twice, or two at once, leaves the same index.

Payloads are small and JSON-plain: a collection name and record ids (or one pushed document). A batch whose
provider calls keep failing is retried with backoff for the records that failed; after its retries they go to
the failures table, and the rest of the batch is indexed regardless.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from celery import Task
from celery.exceptions import Retry, SoftTimeLimitExceeded

from store.broker.config import soft_time_limit
from store.broker.queues import sent_headers
from store.contract import (
    BUILD_INDEX,
    BULK_QUEUE,
    INDEX_BATCH,
    INDEX_DOCUMENT,
    INDEX_RECORD,
    POOL_BATCH,
    RECONCILE,
    REINDEX_ALL,
)
from store.errors import ConfigError, StoreError, StoreUnavailable
from store.state.generations import parse_name
from store.state.generations.routing import switch_when_built
from store.state.ledger import RunProgress, RunStatus
from store.vectors.records import check_collection_name
from worker.batches import BatchResult, Document
from worker.celery import app
from worker.delivery import RedeliveredTask, delivered_again_if_unsent, send
from worker.fanout import count_run, fan_out
from worker.metrics import observe_batch
from worker.pipeline import Indexer
from worker.policy import RetryPolicy, as_failed, as_retry, combined, decide
from worker.pooling import LeftoverPool
from worker.process import context
from worker.sweeps import close_lost_runs, older_than

__all__ = ["build_index", "index_batch", "index_document", "index_record", "reconcile", "reindex_all"]

log = logging.getLogger(__name__)
#: Ledger ids checked per step when a full reindex looks for records gone from the source (and pooled records
#: indexed per step by a run's pool batch).
GONE_PAGE = 500
#: Seconds a pool batch waits before it looks again when records reached the pool (or a claim) while it wrote.
POOL_WAIT_SECONDS = 1.0
#: The owner of the pool batch's claim: one for every copy of it, so that each takes what another left.
POOL_OWNER = "pool"


#: Every task: a backend that cannot be reached where no finer rule applies (building this process's context,
#: opening a run) retries the task with backoff, never loses it.
_RETRIED: dict[str, Any] = {"max_retries": None, "autoretry_for": (StoreUnavailable,), "retry_backoff": True,
                            "retry_backoff_max": 60, "base": RedeliveredTask}


def _policy(task: Task) -> RetryPolicy:
    """``worker.max_retries``; none for a pushed document, whose content lives only in its message."""
    policy = RetryPolicy.from_settings(context().settings.worker)
    return policy.without_limit() if task.name == INDEX_DOCUMENT else policy


def _process(task: Task, collection: str, ids: list[str], *, run_id: str | None = None, batch: int | None = None,
             carried: dict[str, int] | None = None, work: Callable[[], dict[str, BatchResult]] | None = None,
             pooled: bool = False, before_count: Callable[[], bool] | None = None,
             left: Callable[[], bool] | None = None, counted_elsewhere: bool = False) -> dict[str, int]:
    """Index ``ids`` in every generation a write of ``collection`` goes to (or run ``work`` for them), then act
    on ``worker.policy.decide``: record failures, retry what retrying can fix, count the batch in its run once.

    Whatever goes wrong, a batch of a run ends counted (its records as failed),
    so the run cannot stay ``running`` because of it. A failure is recorded under
    the generation's physical collection, where indexing the record clears it. ``pooled``: a batch of a run
    with a leftover pool (``worker.pooling``), whose retries stay pooled and whose count may send the pool
    batch; ``before_count``: False puts the count off (the pool batch, while records wait in the pool); ``left``:
    whether the attempt left records in the pool's Redis; ``counted_elsewhere``: as ``decide``'s.
    """
    ctx, policy, retries = context(), _policy(task), task.request.retries
    outcomes: dict[str, BatchResult] = {}
    try:
        outcomes = work() if work is not None else ctx.written(collection, ids, lambda indexer: indexer.index(ids))
        result = combined(outcomes)
    except StoreUnavailable as exc:
        log.warning("store unavailable for %s (%d records): %s", collection, len(ids), exc)
        if policy.may_retry(retries):
            raise task.retry(exc=exc, countdown=policy.countdown(retries), max_retries=policy.max_retries) from exc
        result = as_retry(ids, exc)
    except SoftTimeLimitExceeded as exc:  # the hard limit follows: retried, counted, rather than lost with it
        limit = ctx.settings.worker.time_limit
        log.warning("%d records of %s ran into the soft time limit (worker.time_limit %ds)", len(ids), collection,
                    limit)
        overran = TimeoutError(f"the batch ran into its time limit (worker.time_limit = {limit}s)")
        if policy.may_retry(retries):
            raise task.retry(exc=overran, countdown=policy.countdown(retries), max_retries=policy.max_retries) from exc
        result = as_retry(ids, overran)
    except ConfigError as exc:
        if run_id:
            ctx.ledger.fail_run(run_id, str(exc))
        raise
    except Retry:
        raise
    except Exception as exc:  # a bug or an untranslated error: fail these records, not the run
        log.exception("indexing %d records of %s failed", len(ids), collection)
        result = as_failed(ids, exc)
    observe_batch(collection, result)
    decision = decide(result, retries=retries, policy=policy, carried=carried, counted_elsewhere=counted_elsewhere)
    for record_id, error in decision.failures.items():
        where = next((physical for physical, outcome in outcomes.items()
                      if record_id in outcome.failed or record_id in outcome.retry), collection)
        _record_failure(where, record_id, error, run_id=run_id)
    if decision.retry:
        log.info("retrying %d records of %s: %s", len(decision.retry), collection, next(iter(result.retry.values())))
        if batch is None:  # index_record: its own arguments
            raise task.retry(countdown=decision.countdown, max_retries=policy.max_retries)
        raise task.retry(args=(collection, decision.retry), kwargs=_batch_kwargs(run_id, batch, decision.counts,
                                                                                 pooled),
                         countdown=decision.countdown, max_retries=policy.max_retries)
    if run_id is not None and batch is not None:
        if before_count is not None and not before_count():
            raise task.retry(args=(collection, []), kwargs=_batch_kwargs(run_id, batch, decision.counts, pooled),
                             countdown=POOL_WAIT_SECONDS, max_retries=None)
        try:
            progress = ctx.ledger.finish_batch(run_id, batch, **decision.counts)
        except StoreUnavailable as exc:  # the batch is done; counting it must not be lost with the database
            raise task.retry(exc=exc, countdown=policy.countdown(retries), max_retries=None) from exc
        with delivered_again_if_unsent(task):
            if pooled:
                _flush_when_due(collection, progress, left=bool(result.deferred) or (left is not None and left()))
            _finished(collection, progress)
    return decision.counts


def _batch_kwargs(run_id: str | None, batch: int | None, carried: dict[str, int], pooled: bool) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"run_id": run_id, "batch": batch, "carried": carried}
    return kwargs | {"pooled": True} if pooled else kwargs


def _flush_when_due(collection: str, progress: RunProgress, *, left: bool = False) -> None:
    """Send a pooled run's pool batch once every other batch of it is counted (each of those that sees it so
    sends one: the pool batch takes a second one's claim for nothing, and counts once); and again when a
    batch ``left`` records in the pool of a run that had ended meanwhile (a redelivered batch, run again
    after the pool batch), so that they are indexed all the same."""
    due = progress.status == RunStatus.RUNNING and progress.batches is not None \
        and progress.counted == progress.batches - 1
    if due or (left and progress.status != RunStatus.RUNNING):
        _send_batch(collection, [], run_id=progress.run_id, batch=POOL_BATCH, pooled=True)


def _record_failure(collection: str, record_id: str, error: str, *, run_id: str | None) -> None:
    """Put a record in the failures table; if even that fails, say so in the log and go on counting the batch."""
    try:
        context().ledger.record_failure(collection, record_id, error, run_id=run_id)
    except SoftTimeLimitExceeded:
        raise
    except Exception:
        log.exception("could not record the failure of %r in %s: %s", record_id, collection, error)


@app.task(bind=True, name=INDEX_RECORD, **_RETRIED)
def index_record(self: Task, collection: str, record_id: str) -> dict[str, int]:
    """Bring one record's chunks in line with its source (live queue)."""
    if not self.request.retries:
        context().coalescer.release(collection, str(record_id))
    return _process(self, collection, [str(record_id)])


@app.task(bind=True, name=INDEX_BATCH, **_RETRIED)
def index_batch(self: Task, collection: str, ids: list[str], run_id: str | None = None, batch: int | None = None,
                carried: dict[str, int] | None = None, pooled: bool = False, fresh: bool = False) -> dict[str, int]:
    """Index a batch of record ids (bulk queue); counted once in its run. ``pooled``: the run has a leftover
    pool (``worker.pooling``), so the batch makes only full provider calls; batch ``POOL_BATCH`` empties it.
    ``fresh``: the ledger held none of the ids when the fan-out looked, so a first attempt does not read it
    (``Indexer.index``)."""
    ids = [str(i) for i in ids]
    fresh = fresh and not _again(self)
    pool = context().leftovers() if pooled and run_id is not None and batch is not None else None
    if pool is None or run_id is None or batch is None:
        work = None if not fresh else lambda: context().written(collection, ids, lambda i: i.index(ids, fresh=True))
        return _process(self, collection, ids, run_id=run_id, batch=batch, carried=carried, pooled=pooled,
                        work=work)
    if batch == POOL_BATCH:
        return _empty_pool(self, collection, ids, pool, run_id=run_id, carried=carried)
    return _pooled_batch(self, collection, ids, pool, run_id=run_id, batch=batch, carried=carried, fresh=fresh)


def _pooled_batch(task: Task, collection: str, ids: list[str], pool: LeftoverPool, *, run_id: str, batch: int,
                  carried: dict[str, int] | None, fresh: bool = False) -> dict[str, int]:
    """A batch of a pooled run, whichever attempt: it fills its last provider call from the pool, leaves what
    still does not fill one there, and counts its own ids alone (see ``worker.pooling``). What it claimed and
    could not index goes back for the pool batch; when the pool cannot be reached, the claim stays for it."""
    ctx, owner = context(), str(batch)
    stayed: list[bool] = []

    def work() -> dict[str, BatchResult]:
        try:
            outcomes = ctx.written(collection, ids, lambda indexer: indexer.index(ids), alone=lambda indexer:
                                   indexer.index(ids, leftovers=pool.run(run_id, owner), fresh=fresh))
        except BaseException:
            with contextlib.suppress(StoreUnavailable):
                pool.release(run_id, owner)  # what it claimed goes back, for another batch to index
            raise
        owned = {physical: result.owned() for physical, result in outcomes.items()}
        claimed = [i for result in outcomes.values() for i in result.claimed]
        if claimed:
            back = [i for _, theirs in owned.values() for i in (*theirs.failed, *theirs.retry)]
            for _, theirs in owned.values():
                observe_batch(collection, theirs)  # written here, counted by their own batches
            try:
                stayed.append(pool.settle(run_id, owner, [i for i in claimed if i not in back], back) > 0 or bool(back))
            except StoreUnavailable as exc:  # the pool batch takes the claim over and writes it again
                log.warning("batch %s of run %s left its claim to the pool batch (%s)", batch, run_id, exc)
                stayed.append(True)
        return {physical: own for physical, (own, _) in owned.items()}

    return _process(task, collection, ids, run_id=run_id, batch=batch, carried=carried, work=work, pooled=True,
                    left=lambda: any(stayed))


def _empty_pool(task: Task, collection: str, ids: list[str], pool: LeftoverPool, *, run_id: str,
                carried: dict[str, int] | None) -> dict[str, int]:
    """A pooled run's last batch: write everything its pool and any claim still hold (and ``ids``, a retry's),
    then count. Other batches counted these records already, so its count only moves those that failed from
    done to failed. While records reach the pool meanwhile (a copy of a batch run late), it looks again first."""
    ctx = context()
    todo = sorted({*ids, *pool.take_over(run_id, POOL_OWNER)})
    final = not _policy(task).may_retry(task.request.retries)

    def in_pages(indexer: Indexer) -> BatchResult:
        result = BatchResult()
        for start in range(0, len(todo), GONE_PAGE):
            result.add(indexer.index(todo[start:start + GONE_PAGE]))
        return result

    def work() -> dict[str, BatchResult]:
        outcomes = ctx.written(collection, todo, in_pages)
        again = set() if final else {i for result in outcomes.values() for i in result.retry}
        pool.settle(run_id, POOL_OWNER, [i for i in todo if i not in again])  # a retry's records stay claimed
        return outcomes

    return _process(task, collection, todo, run_id=run_id, batch=POOL_BATCH, carried=carried, work=work,
                    pooled=True, counted_elsewhere=True, before_count=lambda: not pool.others(run_id, POOL_OWNER))


@app.task(bind=True, name=INDEX_DOCUMENT, **_RETRIED)
def index_document(self: Task, collection: str, id: str, text: str | None, metadata: dict[str, Any] | None = None,
                   version: int = 0) -> dict[str, int]:
    """Index a document pushed with its content; ``text=None`` deletes it."""
    doc_id = str(id)

    def work() -> dict[str, BatchResult]:
        if text is None:
            return context().written(collection, [doc_id], lambda i: i.delete_documents([doc_id], version=version))
        document = Document(doc_id, text, metadata or {}, version)
        return context().written(collection, [doc_id], lambda i: i.index_documents([document]))

    return _process(self, collection, [doc_id], work=work)


@app.task(bind=True, name=REINDEX_ALL, **_RETRIED)
def reindex_all(self: Task, collection: str, full: bool = False, run_id: str | None = None,
                allow_empty: bool = False) -> str:
    """Fan what changed in a collection out as batch tasks on the bulk queue (``worker.fanout``: a first
    load sends every id); with ``full``, drop records gone from the source."""
    ctx = context()
    check_collection_name(collection)
    run_id = ctx.ledger.create_run(collection, full=full, run_id=run_id)
    try:
        indexer = ctx.started(collection)
        indexer.source.page_ids(after=None, limit=1)  # a pushed collection has nothing to read: refuse first
        indexer.forget_if_lost()
        if indexer.collection.defer_index():
            ctx.ledger.defer_index(run_id)
            log.info("%s is empty: its vector index is built once every record is in", collection)
        pooled = ctx.leftovers() is not None
        found = fan_out(indexer, batch_size=ctx.settings.worker.batch_size, keep_ids=full,
                        changed_only=not _again(self),
                        send=lambda ids, batch: _send_batch(collection, ids, run_id=run_id, batch=batch,
                                                            pooled=pooled),
                        fresh=lambda ids, batch: _send_batch(collection, ids, run_id=run_id, batch=batch,
                                                             pooled=pooled, fresh=True))
        if full:
            _drop_gone(collection, found.seen, allow_empty=allow_empty)
    except (StoreUnavailable, SoftTimeLimitExceeded) as exc:  # a fan-out cut short fans out again, in full
        policy = _policy(self)
        if policy.may_retry(self.request.retries):
            raise self.retry(exc=exc, countdown=policy.countdown(self.request.retries),
                             max_retries=policy.max_retries) from exc
        ctx.ledger.fail_run(run_id, str(exc) or type(exc).__name__)
        log.error("reindex %s of %s failed: %s", run_id, collection, exc)
        return run_id
    except (ConfigError, StoreError) as exc:
        ctx.ledger.fail_run(run_id, str(exc))
        raise
    except Exception as exc:  # a bug: the run ends failed, saying what happened
        ctx.ledger.fail_run(run_id, f"{type(exc).__name__}: {exc}")
        raise
    progress = count_run(ctx.ledger, run_id, found, pooled=pooled)
    with delivered_again_if_unsent(self):
        if pooled:
            _flush_when_due(collection, progress)
        _finished(collection, progress)
    log.info("reindex %s of %s: %d records, %d unchanged, the rest in %d batches", run_id, collection, found.total,
             found.unchanged, found.batches)
    return run_id


def _again(task: Task) -> bool:
    """Whether this is a second attempt of the task (retried or redelivered): a run then fans out every id page,
    numbered as in a first load, since batches of the first attempt may be counted already, by number."""
    return bool(task.request.retries or (task.request.delivery_info or {}).get("redelivered"))


def _send_batch(collection: str, ids: list[str], *, run_id: str, batch: int, pooled: bool = False,
                fresh: bool = False) -> None:
    kwargs = _batch_kwargs(run_id, batch, {}, pooled) | {"carried": None} | ({"fresh": True} if fresh else {})
    send(index_batch, args=(collection, ids), kwargs=kwargs, queue=BULK_QUEUE, headers=sent_headers())


def _finished(collection: str, progress: RunProgress) -> None:
    """A run whose records are all in and whose index was deferred gets the index built, as a task of its own
    with its own time limit; the run says ``indexing`` until then, so ``done`` means searchable at full speed.
    A migration's run that is done switches its collection to the new generation."""
    if progress.status == RunStatus.DONE:
        if parse_name(collection)[1] is not None:  # a generation's run: never switch to one without its index
            context().indexer(collection).collection.ensure_index()
        switch_when_built(context().ledger.generations, progress)
    elif progress.status == RunStatus.INDEXING:
        limit = context().settings.worker.index_time_limit
        send(build_index, args=(collection, progress.run_id), queue=BULK_QUEUE, headers=sent_headers(),
             time_limit=limit, soft_time_limit=soft_time_limit(limit, context().settings))


@app.task(bind=True, name=BUILD_INDEX, **_RETRIED)
def build_index(self: Task, collection: str, run_id: str) -> str:
    """Build the vector index a bulk load deferred (a no-op when it exists), then call the run done."""
    ctx = context()
    try:
        ctx.indexer(collection).collection.ensure_index()
    except StoreUnavailable as exc:
        policy = _policy(self)
        if policy.may_retry(self.request.retries):
            raise self.retry(exc=exc, countdown=policy.countdown(self.request.retries),
                             max_retries=policy.max_retries) from exc
        ctx.ledger.fail_run(run_id, f"the vector index could not be built: {exc}")
        return "failed"
    except Exception as exc:
        ctx.ledger.fail_run(run_id, f"the vector index could not be built: {type(exc).__name__}: {exc}")
        raise
    progress = ctx.ledger.complete_run(run_id)
    _finished(collection, progress)
    return str(progress.status)


def _drop_gone(collection: str, seen: set[str], *, allow_empty: bool) -> None:
    ctx = context()
    indexer = ctx.indexer(collection)
    if not seen and not allow_empty and indexer.collection.count() > 0:
        raise ConfigError(
            f"the source of {collection!r} returned no records; a full reindex would empty the collection. "
            "Check the source, or pass allow_empty (vectorsync reindex --full --allow-empty)"
        )
    gone = sorted(ctx.ledger.record_ids(indexer.name) - seen)  # the live generation's ledger
    for start in range(0, len(gone), GONE_PAGE):
        indexer.index(gone[start:start + GONE_PAGE])  # each is re-checked against the source, then deleted


@app.task(bind=True, name=RECONCILE, **_RETRIED)
def reconcile(self: Task, collection: str, run_id: str | None = None) -> str:
    """Compare the source with the ledger; enqueue what is missing, changed or gone.

    Heals lost messages (a Redis restart without persistence, a flushed queue):
    Celery beat runs it per collection every ``worker.reconcile_seconds``.
    """
    ctx = context()
    run_id = ctx.ledger.create_run(collection, run_id=run_id, kind="reconcile")
    try:
        indexer = ctx.started(collection)
        busy = older_than(close_lost_runs(collection, run_id), run_id)
        if busy:  # its batches may still wait in the queue: enqueuing them again would only grow the backlog
            log.info("reconcile %s of %s skipped: run %s is still at work", run_id, collection, busy[0].run_id)
            ctx.ledger.set_run_total(run_id, total=0, batches=0)
            return run_id
        indexer.forget_if_lost()
        stale = indexer.stale(page_size=ctx.settings.worker.batch_size)
    except StoreUnavailable:  # retried with backoff (_RETRIED): the sweep goes on once the backend is back
        raise
    except Exception as exc:  # the sweep ends failed, saying why; the next one starts afresh
        ctx.ledger.fail_run(run_id, f"{type(exc).__name__}: {exc}")
        raise
    size = ctx.settings.worker.batch_size
    pages = [stale[start:start + size] for start in range(0, len(stale), size)]
    for number, ids in enumerate(pages):
        _send_batch(collection, ids, run_id=run_id, batch=number)
    ctx.ledger.set_run_total(run_id, total=len(stale), batches=len(pages))
    log.info("reconcile %s of %s: %d records to index", run_id, collection, len(stale))
    return run_id
