"""Live changes end to end: concurrent tasks for rows that keep changing leave no stale or duplicate chunk, and a
live update is indexed while a big reindex runs."""

from __future__ import annotations

import random

import pytest
from celery import Celery

from store.broker.config import celery_config
from store.contract import INDEX_RECORD, LIVE_QUEUE
from store.state.ledger import RunStatus
from tests.crm import note
from tests.integration.worker.end_to_end.world import World
from tests.workers import celery_worker, wait_for

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("broker", ["redis"], indirect=True)  # row locks in PostgreSQL, whatever the broker
def test_concurrent_index_tasks_for_changing_rows_leave_no_stale_or_duplicate_chunk(world: World) -> None:
    ids = list(range(1, 21))
    world.crm.insert([note(i) for i in ids])
    app = Celery(set_as_current=False)
    app.conf.update(celery_config(world.settings))
    rng = random.Random(11)
    with celery_worker(world.config, concurrency=2):
        for step in range(200):
            record = rng.choice(ids)
            if step % 2 == 0:
                world.crm.update(record, body=note(record, version=step, rng=rng)["body"], kind=rng.choice(["a", "b"]))
            app.send_task(INDEX_RECORD, args=(world.collection, str(record)), queue=LIVE_QUEUE)
        for record in ids:  # the app enqueues after its last change of each row
            app.send_task(INDEX_RECORD, args=(world.collection, str(record)), queue=LIVE_QUEUE)
        wait_for(world.in_sync, timeout=120, what="the store to equal the final source")
        _wait_idle(app)
        assert world.in_sync()
    stored = world.stored()
    per_record: dict[str, int] = {}
    for chunk_id in stored:
        record_id = chunk_id.split(":")[0]
        per_record[record_id] = per_record.get(record_id, 0) + 1
    expected = world.expected()
    assert len(stored) == len(expected) and set(per_record) == {str(i) for i in ids}
    app.close()


def _wait_idle(app: Celery) -> None:
    def idle() -> bool:
        inspect = app.control.inspect(timeout=1)
        active, reserved = inspect.active() or {}, inspect.reserved() or {}
        return not any(active.values()) and not any(reserved.values())

    wait_for(idle, timeout=60, what="the workers to go idle")


def test_a_live_update_is_indexed_while_a_big_reindex_runs(world: World) -> None:
    world.crm.insert([note(i) for i in range(1, 10_001)])
    producer = world.producer()
    with celery_worker(world.config, concurrency=2):
        run_id = producer.reindex_all(world.collection)
        wait_for(lambda: producer.reindex_status(run_id).processed >= 200, timeout=120, what="the reindex to start")
        world.crm.insert([{"id": 20_000, "title": "Live", "body": "a live change", "kind": "call"}])
        producer.index_record(world.collection, 20_000)
        wait_for(lambda: "20000:0" in world.stored(), timeout=60, what="the live record")
        progress = producer.reindex_status(run_id)
        assert progress.status == RunStatus.RUNNING and progress.processed < 10_000, progress
        wait_for(
            lambda: producer.reindex_status(run_id).status != RunStatus.RUNNING,
            timeout=300,
            what="the reindex to finish",
        )
        assert world.in_sync()
    producer.close()
