"""The reconcile task, run with the worker's own code in this process (``producer.testing``): a sweep retried or
delivered again goes on with the run it began, whatever its sender named, and never counts its batches anew."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from producer import testing
from store.contract import INDEX_BATCH, RECONCILE
from store.errors import StoreUnavailable
from store.state.ledger import RunProgress, RunStatus


def failing_once(method: Callable[..., RunProgress]) -> Callable[..., RunProgress]:
    """``method``, raising StoreUnavailable on its first call only (the state database restarting)."""
    calls = []

    def failing(*args: Any, **kwargs: Any) -> RunProgress:
        calls.append(args)
        if len(calls) == 1:
            raise StoreUnavailable("the state database is restarting")
        return method(*args, **kwargs)

    return failing


def test_a_sweep_retried_after_its_total_was_lost_ends_the_run_it_began(
    notes_settings: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a 2-minute chaos run, a sweep sent its batches and could not write its total (the database went
    silent): Celery retried the task as beat sent it, without a run id, so a new run began and the first stayed
    ``running`` with no total, and every later sweep yielded to it. A retry goes on with the run it began."""
    with testing.queue(notes_settings(max_retries=3)) as queue:
        monkeypatch.setattr(queue.ledger, "set_run_total", failing_once(queue.ledger.set_run_total))
        sweep = queue.producer.reconcile("notes")
        queue.run_queue()
        runs = queue.ledger.recent_runs(10)
        assert [(r.run_id, r.status, r.total) for r in runs] == [(sweep, RunStatus.DONE, 3)]
        assert sum(len(t.args[1]) for t in queue.done if t.name == INDEX_BATCH) == 3  # each record sent once


def test_a_sweep_sent_by_beat_and_retried_stays_one_run(
    notes_settings: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beat sends a sweep with no run id: its retries go on with the run named after its message."""
    with testing.queue(notes_settings(max_retries=3)) as queue:
        monkeypatch.setattr(queue.ledger, "set_run_total", failing_once(queue.ledger.set_run_total))
        queue.send_task(RECONCILE, args=("notes",))
        queue.run_queue()
        assert [(r.kind, r.status, r.total) for r in queue.ledger.recent_runs(10)] == [("reconcile", RunStatus.DONE, 3)]


def test_a_sweep_delivered_again_after_it_sent_batches_ends_its_run(
    notes_settings: Callable[..., dict[str, Any]],
) -> None:
    """Its worker was killed while it sent: how many batches went out is unknown, so counting anew could end the
    run early or never. The run ends failed, saying so, and nothing more is sent; the next sweep sends the rest."""
    with testing.queue(notes_settings(max_retries=3)) as queue:
        run_id = queue.ledger.create_run("notes", kind="reconcile")
        queue.ledger.set_run_total(run_id, total=3, batches=1)
        queue.send_task(RECONCILE, args=("notes",), kwargs={"run_id": run_id})
        queue.run_queue()
        run = queue.ledger.run(run_id)
        assert run.status == RunStatus.FAILED and "stopped while it sent" in (run.error or "")
        assert not [t for t in queue.done if t.name == INDEX_BATCH]
