"""The reindex tasks, run with the worker's own code in this process (``producer.testing``): a fan-out retried
goes on with the run it began, one cut short by its soft time limit is retried rather than failing its run, and
an index build waits for its build in steps shorter than its time limit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from producer import testing
from store.contract import REINDEX_ALL
from store.state.ledger import RunStatus
from tests.unit.worker.tasks.test_reconcile import failing_once
from worker.tasks import reindex


def test_a_reindex_retried_without_a_run_id_ends_the_run_it_began(
    notes_settings: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """App code may send ``reindex_all`` with the collection alone: a retry must not begin a second run."""
    with testing.queue(notes_settings(max_retries=3)) as queue:
        queue.send_task(REINDEX_ALL, args=("notes",))
        monkeypatch.setattr(queue.ledger, "set_run_total", failing_once(queue.ledger.set_run_total))
        queue.run_queue()
        runs = queue.ledger.recent_runs(10)
        assert [(r.status, r.total) for r in runs] == [(RunStatus.DONE, 3)]


def test_a_fan_out_that_runs_into_its_soft_time_limit_is_retried_rather_than_failing_its_run(
    notes_settings: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    fan_out, left = reindex.fan_out, [1]

    def slow(*args: Any, **kwargs: Any) -> Any:
        if left[0]:
            left[0] -= 1
            raise SoftTimeLimitExceeded()
        return fan_out(*args, **kwargs)

    monkeypatch.setattr(reindex, "fan_out", slow)
    with testing.queue(notes_settings(max_retries=3)) as queue:
        run_id = queue.producer.reindex_all("notes")
        queue.run_queue()
        assert [t.retries for t in queue.done if t.name == REINDEX_ALL] == [0, 1]
        run = queue.ledger.run(run_id)
        assert (run.status, run.done, run.failed, run.error) == (RunStatus.DONE, 3, 0, "")


def test_a_build_index_task_waits_a_minute_at_most_and_leaves_before_its_time_limit() -> None:
    """The build goes on in PostgreSQL: the task only waits for it, in steps a shutdown or a limit never cuts."""
    from store.settings import Settings

    assert reindex._wait_seconds(Settings()) == reindex.BUILD_WAIT_SECONDS
    short = Settings(worker={"time_limit": 4}, broker={"visibility_timeout": 6})
    assert reindex._wait_seconds(short) == 2  # no soft limit at 4 s: half the hard one
