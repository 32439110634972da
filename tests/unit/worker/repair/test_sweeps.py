"""Reconcile sweeps never pile up: one that starts while another run of its collection is at work ends at
once, enqueuing nothing (worker.repair.sweeps). Run with the worker's own task code in this process."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from producer import testing
from store.broker.queues import QueueState
from store.contract import BULK_QUEUE, INDEX_BATCH
from store.state.ledger import RunProgress, RunStatus
from worker.repair import sweeps
from worker.repair.sweeps import at_work


def test_a_sweep_behind_a_run_at_work_enqueues_nothing(notes_settings: Callable[..., dict[str, Any]]) -> None:
    """In the 30-minute chaos run, sweeps sent every 20 s waited behind a backlog, then ran back to back, each
    enqueuing the same thousands of records again: the index never caught up."""
    with testing.queue(notes_settings(max_retries=3)) as queue:
        busy = queue.producer.reindex_all("notes")  # its fan-out not run yet: the run is at work
        sweep = queue.producer.reconcile("notes")
        queue.run_pending()  # the reindex fans out, the sweep finds it running
        run = queue.ledger.run(sweep)
        assert (run.status, run.total) == (RunStatus.DONE, 0)
        queue.run_queue()
        assert queue.ledger.run(busy).status == RunStatus.DONE
        assert sum(len(t.args[1]) for t in queue.done if t.name == INDEX_BATCH) == 3  # the reindex's alone
        again = queue.producer.reconcile("notes")  # nothing at work now: a sweep runs in full
        queue.run_queue()
        assert queue.ledger.run(again).status == RunStatus.DONE


def test_of_two_sweeps_started_together_the_first_goes_on(notes_settings: Callable[..., dict[str, Any]]) -> None:
    """Sweeps queued behind a backlog ran at the same moment and each yielded to the other: none ran."""
    with testing.queue(notes_settings(max_retries=3)) as queue:
        first, second = queue.producer.reconcile("notes"), queue.producer.reconcile("notes")
        queue.run_pending()
        assert queue.ledger.run(second).total == 0  # yielded to the first
        queue.run_queue()
        assert (queue.ledger.run(first).status, queue.ledger.run(first).total) == (RunStatus.DONE, 3)


def test_a_fan_out_that_has_not_moved_for_stall_seconds_holds_no_sweep_back(
    notes_settings: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chaos seed 11: full reindexes whose fan-out had lost its task stayed running with no total, and every sweep
    yielded to them, so the rows a TRUNCATE emptied were never dropped. Batches of other collections wait in the
    bulk queue, as they did there, so the lost run cannot be closed as lost."""
    waiting = [QueueState(BULK_QUEUE, depth=40, oldest_seconds=5.0)]
    monkeypatch.setattr(sweeps, "queue_states", lambda *args, **kwargs: waiting)
    settings = notes_settings(max_retries=3)
    settings["worker"]["stall_seconds"] = 1
    with testing.queue(settings) as queue:
        lost = queue.ledger.create_run("notes", full=True)  # its reindex_all message gone: no total, no move
        time.sleep(1.2)
        sweep = queue.producer.reconcile("notes")
        queue.run_queue()
        assert (queue.ledger.run(sweep).status, queue.ledger.run(sweep).total) == (RunStatus.DONE, 3)
        assert (queue.ledger.run(lost).status, queue.ledger.run(lost).total) == (RunStatus.RUNNING, None)


def test_a_sweep_yields_to_a_run_whose_batches_are_out_or_that_moved_lately() -> None:
    now, stall = datetime(2026, 12, 4, 12, 0, tzinfo=UTC), 300.0
    started = now - timedelta(seconds=1000)
    run = RunProgress(
        run_id="r",
        collection="notes",
        status=RunStatus.RUNNING,
        total=None,
        done=0,
        skipped=0,
        failed=0,
        full=True,
        started_at=started,
        finished_at=None,
    )
    assert not at_work(run, now=now, stall=stall)
    assert at_work(replace(run, total=40), now=now, stall=stall)  # its batches are queued
    assert at_work(replace(run, moved_at=now - timedelta(seconds=299)), now=now, stall=stall)
    assert at_work(replace(run, started_at=now - timedelta(seconds=10)), now=now, stall=stall)
