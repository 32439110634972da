"""A batch-lane run's batches write as any batch writes: 50 records edited and 10 deleted while the run's job is
out end as their source says (an edited record's new texts bought through the chain, a deleted one staying
deleted), with real workers, PostgreSQL and the fake OpenAI server's Batch API."""

from __future__ import annotations

import pytest

from store.state.ledger import RunStatus
from store.state.ledger.postgres import PostgresLedger
from tests.integration.worker.lane_world import Lane, lane, started
from tests.workers import celery_worker, run_cli, wait_for

__all__ = ["lane"]

pytestmark = pytest.mark.slow


def test_records_edited_and_deleted_while_the_job_is_out_end_as_their_source_says(lane: Lane) -> None:
    lane.openai.batch_seconds = 5.0
    assert run_cli(lane.config, "init").returncode == 0
    with celery_worker(lane.config, concurrency=2):
        run_id = started(lane)
        wait_for(
            lambda: any(m == "POST" and p == "/v1/batches" for m, p in lane.openai.batch_api_calls),
            timeout=60,
            what="the job to be sent",
        )
        sent = {text for job in lane.openai.batch_inputs() for text in job} or None
        for i in range(1, 51):
            lane.crm.update(i, body=f"edited while the job was out, note {i}: renewal pricing")
        lane.crm.delete(list(range(51, 61)))
        done = lane.ended(run_id, timeout=180)
    assert done.status == RunStatus.DONE, done.error
    assert lane.stored() == lane.expected()  # as the source says now: edits in, deletes gone
    ledger = PostgresLedger(lane.database)
    try:
        indexed = ledger.record_ids(lane.collection)
    finally:
        ledger.close()
    assert indexed == {str(i) for i in range(1, 121)} - {str(i) for i in range(51, 61)}
    edited = {text for text, _ in lane.expected().values() if "edited while the job was out" in text}
    chain = {
        text for request in lane.openai.requests if request.path.endswith("/embeddings") for text in request.inputs
    }
    assert edited <= chain and edited.isdisjoint(sent or set())  # the new texts took the normal path
    assert lane.tally(run_id)["deleted"] == 10
