"""Reconcile sweeps never pile up: one that starts while another run of its collection is at work ends at
once, enqueuing nothing (worker.sweeps). Run with the worker's own task code in this process."""

from __future__ import annotations

from producer import testing
from store.contract import INDEX_BATCH
from store.state.ledger import RunStatus
from tests.unit.worker.test_time_limits import notes_settings


def test_a_sweep_behind_a_run_at_work_enqueues_nothing(notes: str) -> None:
    """In the 30-minute chaos run, sweeps sent every 20 s waited behind a backlog, then ran back to back, each
    enqueuing the same thousands of records again: the index never caught up."""
    with testing.queue(notes_settings(notes, max_retries=3)) as queue:
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


def test_of_two_sweeps_started_together_the_first_goes_on(notes: str) -> None:
    """Sweeps queued behind a backlog ran at the same moment and each yielded to the other: none ran."""
    with testing.queue(notes_settings(notes, max_retries=3)) as queue:
        first, second = queue.producer.reconcile("notes"), queue.producer.reconcile("notes")
        queue.run_pending()
        assert queue.ledger.run(second).total == 0  # yielded to the first
        queue.run_queue()
        assert (queue.ledger.run(first).status, queue.ledger.run(first).total) == (RunStatus.DONE, 3)
