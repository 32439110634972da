"""The indexing tasks, run with the worker's own code in this process (``producer.testing``): a batch's message
read as every sender wrote it, and a pushed document whose message goes back to its queue keeping its copy."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from celery.exceptions import Reject, Retry

from producer import testing
from store.contract import INDEX_BATCH
from store.state.ledger import RunStatus
from tests.unit.worker.tasks.test_documents import Kept
from worker.tasks import indexing


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
    kept = Kept()
    settings = {"collections": {"docs": {"source": {"kind": "push"}}}}
    with testing.queue(settings) as queue:
        monkeypatch.setattr(type(queue.context), "pushes", lambda self: kept)

        def failing(task: Any, work: Any) -> dict[str, int]:
            raise raised

        monkeypatch.setattr(indexing, "process", failing)
        with contextlib.suppress(type(raised)):  # Celery keeps a Reject as the task's outcome, raising nothing
            indexing.index_document.apply(args=("docs", "d1", "text", {}, 7), throw=True).get()
    assert kept.settled == ([("docs", "d1", 7)] if settled else [])
