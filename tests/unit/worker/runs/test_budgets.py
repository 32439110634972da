"""A run's budget in its batches (worker.runs.budgets): which caps a batch works under, parked while its run is
paused, and the pause that parks the batch that hit the cap, saying how to resume."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from store.calls.spend import Spend
from store.errors import BudgetExceeded
from store.settings import Settings
from store.state.ledger import MemoryLedger, RunStatus
from worker.runs import budgets
from worker.tasks.flow import Batch, Work


@pytest.fixture
def ledger(monkeypatch: pytest.MonkeyPatch) -> MemoryLedger:
    made = MemoryLedger()
    settings = Settings(collections={"notes": {"budget": {"max_cost": 2.0}}, "docs": {}})
    monkeypatch.setattr(
        budgets, "context", lambda: SimpleNamespace(ledger=made, settings=settings, reservations=lambda: None)
    )
    return made


def work(run_id: str | None, *, collection: str = "notes", pooled: bool = False) -> Work:
    return Work(Batch(collection, ["1", "2"], run_id, 0 if run_id else None, {"done": 1}, pooled), fresh=True)


def test_live_work_a_pooled_batch_and_an_uncapped_run_work_uncapped(ledger: MemoryLedger) -> None:
    assert budgets.admit(work(None)) is budgets.UNCAPPED
    assert budgets.admit(work(ledger.create_run("notes"), pooled=True)) is budgets.UNCAPPED
    assert budgets.admit(work(ledger.create_run("docs"), collection="docs")) is budgets.UNCAPPED


def test_a_runs_own_caps_come_first_else_its_collections_with_what_it_spent_so_far(ledger: MemoryLedger) -> None:
    run = ledger.create_run("notes__g2")
    assert budgets.caps_of(ledger.run(run)) == (None, 2.0)  # a generation's run: its collection's budget
    ledger.set_caps(run, max_tokens=500, max_cost=None)
    assert budgets.caps_of(ledger.run(run)) == (500, 2.0)
    ledger.add_spend(
        [
            Spend(
                run_id=run,
                collection="notes",
                model="m",
                generation=2,
                tokens=40,
                calls=1,
                cost=0.1,
                counted_by="provider",
            )
        ]
    )
    admitted = budgets.admit(work(run, collection="notes__g2"))
    assert not admitted.parked and admitted.budget is not None
    assert (admitted.budget.max_tokens, admitted.budget.max_cost, admitted.budget.spent.tokens) == (500, 2.0, 40)


def test_the_batch_that_hits_the_cap_pauses_its_run_and_later_batches_are_parked(ledger: MemoryLedger) -> None:
    run = ledger.create_run("notes")
    assert budgets.pause(work(run), BudgetExceeded("paused at its budget: `vectorsync runs resume RUN --max-cost N`"))
    paused = ledger.run(run)
    assert paused.status == RunStatus.PAUSED
    assert paused.error == f"paused at its budget: `vectorsync runs resume {run} --max-cost N`"
    later = Work(Batch("notes", ["3"], run, 1), fresh=False)
    assert budgets.admit(later).parked
    parked = ledger.resume_run(run, max_tokens=None, max_cost=5.0)
    assert [(p.batch, p.ids, p.carried, p.fresh) for p in parked] == [
        (0, ["1", "2"], {"done": 1}, True),
        (1, ["3"], None, False),
    ]
    assert not budgets.admit(later).parked  # resumed: it works


def test_a_run_that_no_longer_runs_does_not_pause(ledger: MemoryLedger) -> None:
    run = ledger.create_run("notes")
    ledger.fail_run(run, "broken")
    assert not budgets.pause(work(run), BudgetExceeded("paused"))
    assert ledger.run(run).status == RunStatus.FAILED
