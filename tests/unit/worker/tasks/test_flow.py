"""A batch's way through a task (``worker.tasks.flow.process``): one that runs into its soft time limit is retried
like one whose store was down (counted against ``worker.max_retries``), then given up into the failures table:
never lost with its worker process, so its run ends. Run with the worker's own task code in this process
(``producer.testing``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from producer import testing
from store.contract import INDEX_BATCH
from store.state.ledger import RunStatus
from worker.pipeline.indexer import Indexer


def _slow(monkeypatch: pytest.MonkeyPatch, times: int) -> None:
    """Indexer.index runs into the soft time limit ``times`` times, then indexes."""
    index, left = Indexer.index, [times]

    def slow(self: Indexer, ids: Any, **options: Any) -> Any:
        if left[0]:
            left[0] -= 1
            raise SoftTimeLimitExceeded()
        return index(self, ids, **options)

    monkeypatch.setattr(Indexer, "index", slow)


def test_a_batch_that_runs_into_its_soft_time_limit_is_retried_and_its_run_ends(
    notes_settings: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    _slow(monkeypatch, times=1)
    with testing.queue(notes_settings(max_retries=3)) as queue:
        run_id = queue.producer.reindex_all("notes")
        queue.run_queue()
        assert [t.retries for t in queue.done if t.name == INDEX_BATCH] == [0, 1]
        run = queue.ledger.run(run_id)
        assert (run.status, run.done, run.failed) == (RunStatus.DONE, 3, 0)


def test_one_that_keeps_running_into_it_is_given_up_into_failures_and_its_run_ends(
    notes_settings: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    _slow(monkeypatch, times=10)
    with testing.queue(notes_settings(max_retries=2)) as queue:
        run_id = queue.producer.reindex_all("notes")
        queue.run_queue()
        run = queue.ledger.run(run_id)
        assert (run.status.ended, run.done, run.failed) == (True, 0, 3)
        failures = queue.ledger.failures()
        assert len(failures) == 3 and all("ran into its time limit (worker.time_limit" in f.error for f in failures)
