"""What becomes of a batch after one attempt: retry, give up, and what its run counts.

Pure decisions, no Celery and no I/O, so each rule is tested alone. Records
whose error retrying can fix (a provider or store outage) are retried with
exponential backoff, honouring a provider's Retry-After; after
``max_retries`` they are given up and go to the failures table like records
whose error no retry can fix. A batch of a run is counted once, when nothing
of it is retried any more.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from store.settings import WorkerSettings
from worker.pipeline.batch import BatchResult

__all__ = ["MAX_COUNTDOWN", "Decision", "RetryPolicy", "combined", "decide"]

#: The longest wait between two tries of a batch (a pushed document retried through a long outage).
MAX_COUNTDOWN = 300.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how late a batch is retried."""

    #: None: retried for as long as retrying is what can fix it.
    max_retries: int | None
    retry_delay: float

    @classmethod
    def from_settings(cls, settings: WorkerSettings) -> RetryPolicy:
        return cls(max_retries=settings.max_retries, retry_delay=settings.retry_delay)

    def without_limit(self) -> RetryPolicy:
        """This policy, retrying what an outage holds up until the outage ends: for a pushed document, whose
        content lives only in its task, giving up loses the edit (no source to read it again from)."""
        return RetryPolicy(max_retries=None, retry_delay=self.retry_delay)

    def may_retry(self, retries: int) -> bool:
        """Whether a task that has been retried ``retries`` times may be retried again."""
        return self.max_retries is None or retries < self.max_retries

    def countdown(self, retries: int, *, at_least: float = 0.0) -> float:
        """Seconds before the next try: ``retry_delay`` doubled per retry up to ``MAX_COUNTDOWN``, never below
        ``at_least``."""
        return max(min(float(self.retry_delay * (2 ** min(retries, 32))), MAX_COUNTDOWN), at_least)


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do after one attempt of a batch."""

    #: Records to put in the failures table now, with their error.
    failures: dict[str, str] = field(default_factory=dict)
    #: Records to try again (empty: the batch is finished).
    retry: list[str] = field(default_factory=list)
    #: Seconds before that retry.
    countdown: float = 0.0
    #: The batch's counts so far (carried into the retry), or final when nothing is retried.
    counts: dict[str, int] = field(default_factory=dict)


def decide(
    result: BatchResult,
    *,
    retries: int,
    policy: RetryPolicy,
    carried: Mapping[str, int] | None = None,
    counted_elsewhere: bool = False,
) -> Decision:
    """The decision after an attempt that produced ``result``, the task having been retried ``retries`` times.

    ``counted_elsewhere``: other batches counted these records as done already (the pool batch's records,
    counted by the batches that left them in the pool), so the counts only move those that failed from done
    to failed."""
    carried = carried or {}
    retrying = bool(result.retry) and policy.may_retry(retries)
    gave_up = {} if retrying else {i: f"gave up after {retries} retries: {error}" for i, error in result.retry.items()}
    failures = {**result.failed, **gave_up}
    counts = {
        "done": carried.get("done", 0) + (-len(failures) if counted_elsewhere else result.done),
        "skipped": carried.get("skipped", 0) + (0 if counted_elsewhere else len(result.skipped)),
        "failed": carried.get("failed", 0) + len(failures),
    }
    if retrying:
        return Decision(
            failures=failures,
            retry=sorted(result.retry),
            countdown=policy.countdown(retries, at_least=result.retry_after),
            counts=counts,
        )
    return Decision(failures=failures, counts=counts)


#: A record's outcomes in order of precedence: the worst outcome of any generation is the record's.
_OUTCOMES = ("failed", "retry", "indexed", "deleted", "superseded", "skipped")


def combined(results: Mapping[str, BatchResult]) -> BatchResult:
    """One batch's outcome over the generations it was written to (by physical collection): each record
    counts as its worst outcome in any of them; errors name the generation when there are several."""
    if len(results) == 1:
        return next(iter(results.values()))
    outcome: dict[str, tuple[int, str]] = {}
    errors: dict[str, str] = {}
    total = BatchResult()
    for physical, result in results.items():
        total.chunks += result.chunks
        total.retry_after = max(total.retry_after, result.retry_after)
        for rank, name in enumerate(_OUTCOMES):
            found = getattr(result, name)
            for record_id in found:
                if record_id not in outcome or rank < outcome[record_id][0]:
                    outcome[record_id] = (rank, name)
                    if isinstance(found, dict):
                        errors[record_id] = f"{physical}: {found[record_id]}"
    for record_id, (_, name) in outcome.items():
        into = getattr(total, name)
        if isinstance(into, dict):
            into[record_id] = errors[record_id]
        else:
            into.append(record_id)
    return total
