"""A run's budget in its batches: a batch of a paused run is parked, not worked; a batch works under its run's
caps (its own, else the collection's ``[collections.NAME.budget]``); a batch whose model calls would pass a cap
(reserved together before the first is sent: ``store.calls.caps.prepaid``) pauses the run and is parked, none
of its records written and none of its texts bought (``docs/embeddings.md, Budgets``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from store.calls.caps import Budget
from store.calls.spend import total
from store.errors import BudgetExceeded
from store.state.generations import parse_name
from store.state.ledger import Parked, RunProgress, RunStatus
from worker.runtime.context import context

__all__ = ["UNCAPPED", "Admission", "Batched", "Budgeted", "admit", "caps_of", "pause"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Admission:
    """Whether a batch was parked instead of worked, and the budget it works under (None: no cap)."""

    parked: bool = False
    budget: Budget | None = None


class Batched(Protocol):
    """What of a batch the budget reads (``worker.tasks.flow.Batch`` is one): its run and number, whether its run
    pools, and what a parked batch keeps to be sent again."""

    @property
    def collection(self) -> str: ...

    @property
    def ids(self) -> list[str]: ...

    @property
    def run_id(self) -> str | None: ...

    @property
    def number(self) -> int | None: ...

    @property
    def carried(self) -> dict[str, int] | None: ...

    @property
    def pooled(self) -> bool: ...


class Budgeted(Protocol):
    """A batch's work under its run's budget (``worker.tasks.flow.Work`` is one)."""

    @property
    def batch(self) -> Batched: ...


#: A batch that is no run's (live work, a pushed document), or whose run has no cap.
UNCAPPED = Admission()


def admit(work: Budgeted) -> Admission:
    """Park the batch of a paused run; else the budget of its run, its spend so far read once, counted with
    every process's calls in the cache's Redis when it is one (``store.broker.reservations``)."""
    batch = work.batch
    if batch.run_id is None or batch.number is None or batch.pooled:
        return UNCAPPED
    ledger = context().ledger
    run = ledger.run(batch.run_id)
    if run.status == RunStatus.PAUSED and ledger.park_batch(_parked(work)):
        log.info("batch %d of run %s parked: the run is paused", batch.number, batch.run_id)
        return Admission(parked=True)
    max_tokens, max_cost = caps_of(run)
    if max_tokens is None and max_cost is None:
        return UNCAPPED
    spent = total(ledger.run_spend(batch.run_id))
    shared = context().reservations()
    return Admission(
        budget=Budget(
            spent=spent,
            max_tokens=max_tokens,
            max_cost=max_cost,
            shared=(shared, batch.run_id) if shared is not None else None,
        )
    )


def caps_of(run: RunProgress) -> tuple[int | None, float | None]:
    """The run's caps: its own, else its collection's ``[collections.NAME.budget]``, each alone."""
    declared = context().settings.collections.get(parse_name(run.collection)[0])
    budget = declared.budget if declared is not None else None
    max_tokens = run.max_tokens if run.max_tokens is not None or budget is None else budget.max_tokens
    max_cost = run.max_cost if run.max_cost is not None or budget is None else budget.max_cost
    return max_tokens, max_cost


def pause(work: Budgeted, error: BudgetExceeded) -> bool:
    """Pause the batch's run, saying why, and park the batch; False when the run no longer runs."""
    paused = context().ledger.pause_run(_parked(work), str(error).replace("resume RUN", f"resume {work.batch.run_id}"))
    if paused:
        log.warning("run %s paused: %s", work.batch.run_id, error)
    return paused


def _parked(work: Budgeted) -> Parked:
    batch = work.batch
    assert batch.run_id is not None and batch.number is not None
    return Parked(
        run_id=batch.run_id,
        batch=batch.number,
        collection=batch.collection,
        ids=list(batch.ids),
        carried=batch.carried,
        fresh=bool(getattr(work, "fresh", False)),
    )
