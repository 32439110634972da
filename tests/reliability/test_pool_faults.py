"""The broker's Redis, which also holds a reindex's leftover pool, restarted while pooled batches are between
their claim and their settle: each run ends, once, with every record counted once and nothing left in Redis."""

from __future__ import annotations

import pytest
import redis

from store.contract import POOL_KEY_PREFIX
from tests.crm import note
from tests.reliability.conftest import Rig
from tests.workers import wait_for


@pytest.mark.parametrize("rig", [True], ids=["redis-aof"], indirect=True)
def test_the_broker_restarted_while_pooled_batches_hold_claims(rig: Rig) -> None:
    rig.crm.insert([note(i) for i in range(1, 601)])
    rig.primary.always(delay=0.4)  # every batch spends most of its time in calls, its claim open
    producer = rig.producer()
    with rig.worker(concurrency=2):
        run_id = producer.reindex_all(rig.collection)
        wait_for(lambda: producer.reindex_status(run_id).processed >= 100, timeout=60, what="the run to start")
        rig.broker.restart(down_seconds=3)  # longer than Celery's retries of a publish
        rig.primary.always()
        rig.verify("Redis restarted while pooled batches held claims (AOF)", faults=1)
        [run] = rig.runs()  # each record counted once (a batch run again counts what it wrote as skipped)
        assert (run.status, run.processed, run.total, run.failed) == ("done", 600, 600, 0), run
        cache = redis.Redis.from_url(rig.settings.cache_url)
        assert cache.keys(f"{POOL_KEY_PREFIX}*") == []
        cache.close()
    producer.close()
