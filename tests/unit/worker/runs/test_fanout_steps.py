"""A reindex fanned out in steps, with the worker's own task code in this process (``producer.testing``): each
step is a ``reindex_all`` of the same run queued behind the batches the last one sent, and a run that ended
meanwhile drops its next step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from producer import testing
from store.contract import INDEX_BATCH, REINDEX_ALL
from store.state.ledger import RunStatus


def _stepped(notes_settings: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """The three notes one per batch, one page a step: three steps that send a batch, and one that finds the end."""
    settings = notes_settings(max_retries=1)
    settings["worker"] |= {"batch_size": 1, "fanout_pages": 1}
    return settings


def test_each_step_is_queued_behind_the_batches_the_last_one_sent(
    notes_settings: Callable[..., dict[str, Any]],
) -> None:
    with testing.queue(_stepped(notes_settings)) as queue:
        run_id = queue.producer.reindex_all("notes")
        queue.run_queue()
        names = [t.name for t in queue.done]
        assert names == [REINDEX_ALL, INDEX_BATCH, REINDEX_ALL, INDEX_BATCH, REINDEX_ALL, INDEX_BATCH, REINDEX_ALL]
        assert [t.kwargs.get("cursor", {}).get("after") for t in queue.done if t.name == REINDEX_ALL] == [
            None,
            "1",
            "2",
            "3",
        ]
        run = queue.ledger.run(run_id)
        assert (run.status, run.total, run.done) == (RunStatus.DONE, 3, 3)


def test_a_run_that_ended_before_its_fan_out_did_drops_its_next_step(
    notes_settings: Callable[..., dict[str, Any]],
) -> None:
    with testing.queue(_stepped(notes_settings)) as queue:
        run_id = queue.producer.reindex_all("notes")
        queue.run_pending()  # the first step: one batch and the next step sent
        queue.ledger.fail_run(run_id, "failed by hand")
        queue.run_queue()
        assert [t.name for t in queue.done] == [REINDEX_ALL, INDEX_BATCH, REINDEX_ALL]  # nothing more was sent
        run = queue.ledger.run(run_id)
        assert (run.status, run.error, run.total) == (RunStatus.FAILED, "failed by hand", None)
