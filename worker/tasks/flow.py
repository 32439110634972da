"""A batch's way through a task: do its work (index its ids), then act on ``worker.tasks.policy.decide``: record the
failures, retry what retrying can fix, count the batch in its run once.

Whatever goes wrong, a batch of a run ends counted (its records as failed), so the run cannot stay ``running``
because of it. A failure is recorded under the generation's physical collection, where indexing the record
clears it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from celery import Task
from celery.exceptions import Retry, SoftTimeLimitExceeded

from store.calls import caps, spend
from store.contract import BatchMessage
from store.errors import BudgetExceeded, ConfigError, StoreUnavailable
from store.state.ledger import RunProgress
from worker.metrics.latency import observe_freshness
from worker.metrics.series import observe_batch
from worker.pipeline.batch import BatchResult, as_failed, as_retry
from worker.runs import budgets
from worker.runs.sending import batch_kwargs, flush_when_due, run_finished
from worker.runtime.context import context
from worker.runtime.delivery import delivered_again_if_unsent
from worker.tasks.policy import Decision, RetryPolicy, combined, decide
from worker.tasks.retries import DeliveredTooOften, check_redeliveries, retry_or_give_up, task_policy

__all__ = ["POOL_WAIT_SECONDS", "Batch", "Work", "process"]

log = logging.getLogger(__name__)

#: Seconds a batch whose count must wait (``Work.ready_to_count``) waits before it looks again.
POOL_WAIT_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Batch:
    """What a task indexes: record ids of a collection; for a run's batch, the run, its number in it, what its
    earlier attempts counted, and whether its run pools leftovers (``worker.pipeline.leftovers``)."""

    collection: str
    ids: list[str]
    run_id: str | None = None
    number: int | None = None
    carried: dict[str, int] | None = None
    pooled: bool = False

    def retried(self, ids: list[str], counts: dict[str, int]) -> tuple[tuple[str, list[str]], BatchMessage]:
        """The arguments of this batch's retry for ``ids``, carrying what this attempt ``counts``."""
        return (self.collection, ids), batch_kwargs(self.run_id, self.number, counts, self.pooled)


class Work:
    """What a batch does, and when and how it is counted; this one indexes the batch's ids in every generation
    a write of its collection goes to. Subclasses change the work (a pushed document, a pooled batch)."""

    #: Other batches counted these records already (the pool batch): as ``decide``'s.
    counted_elsewhere = False

    def __init__(self, batch: Batch, *, fresh: bool = False) -> None:
        self.batch, self.fresh = batch, fresh

    def __call__(self) -> dict[str, BatchResult] | None:
        """Each generation's result; None: the batch was put aside, not worked, and is not counted (it will be
        sent again)."""
        ids, fresh = self.batch.ids, self.fresh
        return context().written(self.batch.collection, ids, lambda jobs: jobs.indexer.index(ids, fresh=fresh))

    def given_up(self) -> None:
        """Its message came back too often (``worker.tasks.retries.DeliveredTooOften``): its records fail now."""

    def ready_to_count(self) -> bool:
        """False puts the count off (the pool batch, while records wait in the pool)."""
        return True

    def left(self) -> bool:
        """Whether the attempt left records in the pool's Redis."""
        return False

    def counted(self, progress: RunProgress, result: BatchResult) -> None:
        """Once the batch is counted: a pooled run's pool batch goes out when due."""
        if self.batch.pooled:
            flush_when_due(self.batch.collection, progress, left=bool(result.deferred) or self.left())


def process(task: Task, work: Work) -> dict[str, int]:
    """Run ``work`` for its batch, then record, retry or count as ``decide`` says; the batch's counts."""
    batch, ctx, policy, retries = work.batch, context(), task_policy(task), task.request.retries
    outcomes: dict[str, BatchResult] = {}
    try:
        check_redeliveries(task)
        worked = _worked(work)
        if worked is None:  # parked (a paused run sends it again when resumed), or waiting on the batch lane
            return {}
        outcomes = worked
        result = combined(outcomes)
    except DeliveredTooOften as exc:  # the work itself kills its worker: it fails alone, its run goes on
        log.error("%d records of %s given up: %s", len(batch.ids), batch.collection, exc)
        work.given_up()
        result = as_failed(batch.ids, exc)
    except (StoreUnavailable, SoftTimeLimitExceeded) as exc:  # the hard limit follows: retried, not lost with it
        cause = _cause(batch, exc)
        retry_or_give_up(task, cause)
        result = as_retry(batch.ids, cause)
    except ConfigError as exc:
        if batch.run_id:
            ctx.ledger.fail_run(batch.run_id, str(exc))
        raise
    except Retry:
        raise
    except Exception as exc:  # a bug or an untranslated error: fail these records, not the run
        log.exception("indexing %d records of %s failed", len(batch.ids), batch.collection)
        result = as_failed(batch.ids, exc)
    _observe(task, batch, result)
    decision = decide(
        result, retries=retries, policy=policy, carried=batch.carried, counted_elsewhere=work.counted_elsewhere
    )
    _record_failures(batch, outcomes, decision)
    if decision.retry:
        log.info(
            "retrying %d records of %s: %s", len(decision.retry), batch.collection, next(iter(result.retry.values()))
        )
        args, kwargs = batch.retried(decision.retry, decision.counts) if batch.number is not None else (None, None)
        raise task.retry(args=args, kwargs=kwargs, countdown=decision.countdown, max_retries=policy.max_retries)
    if batch.run_id is not None and batch.number is not None:
        _count(task, work, result, decision.counts, policy)
    return decision.counts


def _worked(work: Work) -> dict[str, BatchResult] | None:
    """``work()`` under its run's budget, its model calls tallied (``store.calls.spend``) and written to the
    ledger once, whatever the outcome: a call that was made is spent. None: the batch was parked (its run is
    paused, or its calls would have passed the run's cap), nothing of it written or bought."""
    admitted = budgets.admit(work)
    if admitted.parked:
        return None
    with spend.tallied(work.batch.run_id) as tally, caps.capped(admitted.budget):
        try:
            return work()
        except BudgetExceeded as exc:
            if budgets.pause(work, exc):
                return None
            raise  # the run no longer runs (it failed meanwhile): its records fail with the cap's message
        finally:
            _write_spend(tally)


def _write_spend(tally: spend.Tally) -> None:
    rows = tally.rows()
    if not rows:
        return
    try:
        context().ledger.add_spend(rows)
    except SoftTimeLimitExceeded:
        raise
    except Exception:  # the batch's records are indexed: losing its spend must not fail them
        log.exception("could not record the spend of %d calls", sum(row.calls for row in rows))


def _observe(task: Task, batch: Batch, result: BatchResult) -> None:
    """Count the batch's outcomes; for a change (not a run's batch), how long it took to be searchable."""
    observe_batch(batch.collection, result)
    if batch.run_id is None:
        observe_freshness(batch.collection, task.request, result, kept=context().freshness())


def _cause(batch: Batch, exc: BaseException) -> BaseException:
    """What to retry ``batch`` for, said in the log: the outage, or the time limit it ran into."""
    if isinstance(exc, StoreUnavailable):
        log.warning("store unavailable for %s (%d records): %s", batch.collection, len(batch.ids), exc)
        return exc
    limit = context().settings.worker.time_limit
    log.warning(
        "%d records of %s ran into the soft time limit (worker.time_limit %ds)", len(batch.ids), batch.collection, limit
    )
    return TimeoutError(f"the batch ran into its time limit (worker.time_limit = {limit}s)")


def _record_failures(batch: Batch, outcomes: dict[str, BatchResult], decision: Decision) -> None:
    for record_id, error in decision.failures.items():
        where = next(
            (
                physical
                for physical, outcome in outcomes.items()
                if record_id in outcome.failed or record_id in outcome.retry
            ),
            batch.collection,
        )
        _record_failure(where, record_id, error, run_id=batch.run_id)


def _record_failure(collection: str, record_id: str, error: str, *, run_id: str | None) -> None:
    """Put a record in the failures table; if even that fails, say so in the log and go on counting the batch."""
    try:
        context().ledger.record_failure(collection, record_id, error, run_id=run_id)
    except SoftTimeLimitExceeded:
        raise
    except Exception:
        log.exception("could not record the failure of %r in %s: %s", record_id, collection, error)


def _count(task: Task, work: Work, result: BatchResult, counts: dict[str, int], policy: RetryPolicy) -> None:
    """Count a run's batch once; a count the database cannot take is retried until it can, never lost."""
    batch = work.batch
    assert batch.run_id is not None and batch.number is not None
    if not work.ready_to_count():
        args, kwargs = batch.retried([], counts)
        raise task.retry(args=args, kwargs=kwargs, countdown=POOL_WAIT_SECONDS, max_retries=None)
    try:
        progress = context().ledger.finish_batch(batch.run_id, batch.number, **counts)
    except StoreUnavailable as exc:  # the batch is done; counting it must not be lost with the database
        raise task.retry(exc=exc, countdown=policy.countdown(task.request.retries), max_retries=None) from exc
    with delivered_again_if_unsent(task):
        work.counted(progress, result)
        run_finished(batch.collection, progress)
