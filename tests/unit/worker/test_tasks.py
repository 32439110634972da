"""The tasks (worker.tasks), run with the worker's own code in this process (``producer.testing``): a run task
retried or delivered again goes on with the run it began, whatever its sender named."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from celery.exceptions import Reject, Retry

from producer import testing
from store.broker.pushes import Push
from store.contract import INDEX_BATCH, RECONCILE, REINDEX_ALL
from store.errors import StoreUnavailable
from store.state.ledger import RunProgress, RunStatus
from worker import flow, pushed, tasks
from worker.retries import DeliveredTooOften


def _failing_once(method: Callable[..., RunProgress]) -> Callable[..., RunProgress]:
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
        monkeypatch.setattr(queue.ledger, "set_run_total", _failing_once(queue.ledger.set_run_total))
        sweep = queue.producer.reconcile("notes")
        queue.run_queue()
        runs = queue.ledger.recent_runs(10)
        assert [(r.run_id, r.status, r.total) for r in runs] == [(sweep, RunStatus.DONE, 3)]
        assert sum(len(t.args[1]) for t in queue.done if t.name == INDEX_BATCH) == 3  # each record sent once


def test_a_reindex_retried_without_a_run_id_ends_the_run_it_began(
    notes_settings: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """App code may send ``reindex_all`` with the collection alone: a retry must not begin a second run."""
    with testing.queue(notes_settings(max_retries=3)) as queue:
        queue.send_task(REINDEX_ALL, args=("notes",))
        monkeypatch.setattr(queue.ledger, "set_run_total", _failing_once(queue.ledger.set_run_total))
        queue.run_queue()
        runs = queue.ledger.recent_runs(10)
        assert [(r.status, r.total) for r in runs] == [(RunStatus.DONE, 3)]


def test_a_sweep_sent_by_beat_and_retried_stays_one_run(
    notes_settings: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beat sends a sweep with no run id: its retries go on with the run named after its message."""
    with testing.queue(notes_settings(max_retries=3)) as queue:
        monkeypatch.setattr(queue.ledger, "set_run_total", _failing_once(queue.ledger.set_run_total))
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


def test_a_queued_batch_message_with_every_keyword_is_still_run(notes_settings: Callable[..., dict[str, Any]]) -> None:
    """Messages sent before ``BatchMessage`` carry ``run_id, batch, carried, pooled, fresh`` as keywords: each
    is read as before (a pooled batch with no pool configured is indexed as a plain one)."""
    with testing.queue(notes_settings(max_retries=3)) as queue:
        run_id = queue.ledger.create_run("notes")
        queue.ledger.set_run_total(run_id, total=3, batches=1)
        message = {"run_id": run_id, "batch": 0, "carried": None, "pooled": True, "fresh": True}
        queue.send_task(INDEX_BATCH, args=("notes", ["1", "2", "3"]), kwargs=message)
        queue.run_queue()
        run = queue.ledger.run(run_id)
        assert (run.status, run.done, run.failed) == (RunStatus.DONE, 3, 0)


def test_a_batch_message_with_a_keyword_it_does_not_know_is_refused(
    notes_settings: Callable[..., dict[str, Any]],
) -> None:
    """``**message`` would take any keyword: one outside ``BatchMessage`` is refused, as the named parameters
    refused it, never silently dropped."""
    with testing.queue(notes_settings(max_retries=3)) as queue:
        queue.send_task(INDEX_BATCH, args=("notes", ["1"]), kwargs={"run": "r1"})
        with pytest.raises(TypeError, match=r"^index_batch\(\) got an unexpected keyword argument 'run'$"):
            queue.run_queue()


class _Kept:
    """The kept pushes, in lists (store.broker.pushes keeps them in Redis)."""

    def __init__(self, lost: list[Push] | None = None) -> None:
        self.settled: list[tuple[str, str, int]] = []
        self.kept: list[Push] = []
        self.waiting = lost or []

    def settle(self, collection: str, id: str, version: int) -> None:
        self.settled.append((collection, id, version))

    def keep(self, collection: str, push: Push) -> None:
        self.kept.append(push)

    def lost(self, collection: str, *, older_than: float) -> Iterator[Push]:
        yield from self.waiting


@pytest.mark.parametrize(
    ("raised", "settled"),
    [(Reject("the broker took no retry", requeue=True), False), (Retry("later"), False), (ValueError("bug"), True)],
    ids=["delivered-again", "retried", "a-bug"],
)
def test_a_push_whose_message_goes_back_to_its_queue_keeps_its_copy(
    raised: Exception, settled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A push delivered again (its retry refused by a restarting broker, say) may be lost on its way back, as a
    first send may: its kept copy goes only once no attempt will run it again."""
    kept = _Kept()
    settings = {"collections": {"docs": {"source": {"kind": "push"}}}}
    with testing.queue(settings) as queue:
        monkeypatch.setattr(type(queue.context), "pushes", lambda self: kept)

        def failing(task: Any, work: Any) -> dict[str, int]:
            raise raised

        monkeypatch.setattr(tasks, "process", failing)
        with contextlib.suppress(type(raised)):  # Celery keeps a Reject as the task's outcome, raising nothing
            tasks.index_document.apply(args=("docs", "d1", "text", {}, 7), throw=True).get()
    assert kept.settled == ([("docs", "d1", 7)] if settled else [])


def test_a_push_given_up_after_too_many_redeliveries_keeps_its_content_and_is_sent_by_no_sweep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its content is in no source: dropping its copy lost it for good. It is parked instead (never lost, never
    sent again), and its failures row names it."""
    kept = _Kept()
    with testing.queue({"collections": {"docs": {"source": {"kind": "push"}}}}) as queue:
        monkeypatch.setattr(type(queue.context), "pushes", lambda self: kept)

        def too_often(task: Any) -> None:
            raise DeliveredTooOften("its task came back 6 times")

        monkeypatch.setattr(flow, "check_redeliveries", too_often)
        tasks.index_document.apply(args=("docs", "d1", "text", {"k": 1}, 7), throw=True).get()
        [failure] = queue.ledger.failures("docs")
    assert kept.settled == [] and [(p.id, p.text, p.version, p.sent_at) for p in kept.kept] == [
        ("d1", "text", 7, math.inf)
    ]
    assert failure.record_id == "d1" and "came back 6 times" in failure.error


def test_a_sweep_sends_again_at_most_so_many_pushes_and_marks_them_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    kept = _Kept([Push(f"d{i}", "text", {}, i + 1, 0.0) for i in range(5)])
    with testing.queue({"collections": {"docs": {"source": {"kind": "push"}}}}) as queue:
        monkeypatch.setattr(type(queue.context), "pushes", lambda self: kept)
        assert pushed.send_lost("docs", at_most=2) == 2
        assert [t.args[1] for t in queue.pending] == ["d0", "d1"]
    assert [p.id for p in kept.kept] == ["d0", "d1"] and all(p.sent_at > 0 for p in kept.kept)


def test_a_build_index_task_waits_a_minute_at_most_and_leaves_before_its_time_limit() -> None:
    """The build goes on in PostgreSQL: the task only waits for it, in steps a shutdown or a limit never cuts."""
    from store.settings import Settings

    assert tasks._wait_seconds(Settings()) == tasks.BUILD_WAIT_SECONDS
    short = Settings(worker={"time_limit": 4}, broker={"visibility_timeout": 6})
    assert tasks._wait_seconds(short) == 2  # no soft limit at 4 s: half the hard one
