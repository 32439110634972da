"""A worker's metrics endpoint scraped after real work: every series of the run's records, calls and queues."""

from __future__ import annotations

import pytest

from tests.crm import note
from tests.integration.worker.end_to_end.world import World, reindex_and_wait
from tests.services import free_port
from tests.workers import celery_worker

pytestmark = pytest.mark.slow


# A port of its own for the metrics server; a fixed id, so that every xdist worker collects the same test.
@pytest.mark.parametrize("world", [free_port()], indirect=True, ids=["metrics-port"])
@pytest.mark.parametrize("broker", ["redis"], indirect=True)  # the worker's own metrics server
def test_worker_metrics_are_scraped_after_real_work(world: World) -> None:
    import urllib.request

    world.crm.insert([note(i) for i in range(1, 41)])
    with celery_worker(world.config):
        assert reindex_and_wait(world).returncode == 0
        port = world.settings.worker.metrics_port
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    c = world.collection
    assert f'vectorsync_records_total{{collection="{c}",outcome="indexed"}} 40.0' in text
    assert 'vectorsync_provider_calls_total{model="fake_openai"}' in text
    assert 'vectorsync_embedding_cache_total{result="miss"}' in text
    assert 'vectorsync_stage_seconds_count{stage="embed"}' in text
    assert 'vectorsync_queue_depth{queue="vectorsync.bulk"} 0.0' in text
    assert 'vectorsync_queue_oldest_seconds{queue="vectorsync.live"} 0.0' in text
    assert 'vectorsync_queue_consumers{queue="vectorsync.bulk"} 1.0' in text  # the one worker of this test
    chunks = sum(1 for _ in world.stored())
    assert f'vectorsync_chunks_embedded_total{{collection="{c}"}} {float(chunks)}' in text
