"""`vectorsync status` in pieces: when a run is stalled and why, and ids shortened without ambiguity."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from producer.cli.status import short_ids, spent_cells, stall_reason
from store.broker.queues import QueueState, WorkerState, consumers_of
from store.calls.spend import Spent
from store.contract import WORKER_COMMAND
from store.state.ledger import RunProgress, RunStatus

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
WORKER = WorkerState("w1@host", ("vectorsync.bulk", "vectorsync.live"), active=0)


def run(*, idle: float, status: RunStatus = RunStatus.RUNNING) -> RunProgress:
    started = NOW - timedelta(seconds=idle + 60)
    return RunProgress(
        run_id="a" * 32,
        collection="notes",
        status=status,
        total=100,
        done=10,
        skipped=0,
        failed=0,
        full=False,
        started_at=started,
        finished_at=None,
        moved_at=NOW - timedelta(seconds=idle),
    )


def bulk(depth: int, *consumers: str) -> QueueState:
    return QueueState("vectorsync.bulk", depth, 30.0 if depth else None, consumers)


def test_a_run_that_moved_recently_or_ended_is_not_stalled() -> None:
    assert stall_reason(run(idle=5), bulk(3, "w1@host"), [WORKER], stall_seconds=60, now=NOW) is None
    assert stall_reason(run(idle=500, status=RunStatus.DONE), bulk(0), [], stall_seconds=60, now=NOW) is None


def test_a_queue_nobody_consumes_stalls_its_run_at_once() -> None:
    """No consumer is known as the broker answers: the run is flagged before stall_seconds, queued work or not."""
    expected = f"no worker consumes vectorsync.bulk: start one with `{WORKER_COMMAND}`"
    for depth in (7, 0):
        assert stall_reason(run(idle=0), bulk(depth), [], stall_seconds=300, now=NOW) == expected
    live_only = WorkerState("w2@host", ("vectorsync.live",), active=0)  # a worker, but not on the run's queue
    assert stall_reason(run(idle=0), bulk(7), [live_only], stall_seconds=300, now=NOW) == expected


def test_no_consumer_is_named_with_the_command_that_starts_one() -> None:
    reason = stall_reason(run(idle=90), bulk(7), [], stall_seconds=60, now=NOW)
    assert reason == f"no worker consumes vectorsync.bulk: start one with `{WORKER_COMMAND}`"


def test_work_queued_but_not_taken_names_the_consumers() -> None:
    reason = stall_reason(run(idle=90), bulk(7, "w1@host"), [WORKER], stall_seconds=60, now=NOW)
    assert reason == "vectorsync.bulk holds 7 tasks but nothing moved for 90s: check the workers' logs (w1@host)"


def test_nothing_queued_nothing_running_means_lost_messages_and_busy_workers_do_not_stall() -> None:
    reason = stall_reason(run(idle=90), bulk(0, "w1@host"), [WORKER], stall_seconds=60, now=NOW)
    assert reason is not None and "its tasks were lost" in reason and "vectorsync reconcile notes" in reason
    busy = WorkerState("w1@host", WORKER.queues, active=1)  # e.g. building the index at the end of a run
    assert stall_reason(run(idle=90), bulk(0, "w1@host"), [busy], stall_seconds=60, now=NOW) is None


def test_without_an_answer_from_the_broker_nothing_is_claimed() -> None:
    assert stall_reason(run(idle=900), None, None, stall_seconds=60, now=NOW) is None


def test_ids_are_shortened_to_a_unique_prefix_of_at_least_eight() -> None:
    ids = ["0123456789abcdef", "0123456789abffff", "fedcba9876543210"]
    assert short_ids(ids) == {
        "0123456789abcdef": "0123456789abc",
        "0123456789abffff": "0123456789abf",
        "fedcba9876543210": "fedcba98",
    }


def test_consumers_are_the_workers_that_listen_on_the_queue() -> None:
    other = WorkerState("w2@host", ("vectorsync.live",), active=2)
    assert consumers_of("vectorsync.bulk", [WORKER, other]) == ("w1@host",)
    assert consumers_of("vectorsync.live", [WORKER, other]) == ("w1@host", "w2@host")


def test_a_runs_tokens_say_estimate_when_estimated_and_no_cost_is_shown_without_a_price() -> None:
    assert spent_cells(None) == ("0", "-")
    assert spent_cells(Spent(tokens=12345, calls=2, cost=0.000247, counted_by="provider")) == ("12,345", "0.0002")
    assert spent_cells(Spent(tokens=40, calls=1, cost=None, counted_by="estimate")) == ("40 estimate", "-")
