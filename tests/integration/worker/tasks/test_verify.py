"""Freshness and the sampled verify through a real ``celery worker``, its metrics endpoint and ``vectorsync status``.

Raw SQL writes to a captured table, and a row written past the triggers that the app then enqueues: each record
made searchable is one sample of ``vectorsync_freshness_seconds``, under its path (capture, app), and ``status``
gives the last hour's p50 and p95. Then a chunk deleted behind the ledger's back, and the ``verify`` task Celery
beat sends: every worker's scrape says one record drifted.
"""

from __future__ import annotations

import json
import math
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from store.broker.producer import Producer
from store.contract import BULK_QUEUE, VERIFY
from tests.crm import insert_notes, note
from tests.integration.worker.capture_world import MakeWorld, init_capture, make_world
from tests.workers import celery_worker, run_cli, wait_for

__all__ = ["make_world"]

pytestmark = pytest.mark.slow

#: A scrape's samples: (name, sorted labels) -> value.
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    """Every sample of a worker's metrics endpoint: (name, sorted labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def fresh(samples: Samples, what: str, collection: str, path: str) -> float:
    return samples[(f"vectorsync_freshness_seconds_{what}", (("collection", collection), ("path", path)))]


def app_change_scraped(port: int, collection: str) -> Samples | None:
    """A scrape once it counts the app's one change, else None."""
    samples = scrape(port)
    return samples if fresh(samples, "count", collection, "app") == 1 else None


def test_captured_writes_and_an_app_send_are_timed_to_searchable_and_a_sampled_verify_is_exported(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    c, t, sql = world.collection, world.source, world.sql
    port = world.settings.worker.metrics_port
    init_capture(world)
    with celery_worker(world.config, concurrency=1):
        first = scrape(port)
        assert fresh(first, "count", c, "capture") == fresh(first, "count", c, "app") == 0.0
        assert first[("vectorsync_freshness_target_seconds", (("collection", c),))] == 5.0
        assert math.isnan(first[("vectorsync_drifted_records", (("collection", c),))])

        insert_notes(sql, t, [note(i) for i in range(1, 11)])  # one statement: ten captured changes
        world.wait_caught_up("ten captured inserts")
        for i in (2, 3, 4):
            sql.run(f'UPDATE "{t}" SET body = %s WHERE id = %s', (note(i, version=1)["body"], i))
        world.wait_caught_up("three captured updates")
        with sql.transaction():  # a writer the triggers do not see (replica mode): the app enqueues the record
            sql.run("SET LOCAL session_replication_role = replica")
            sql.run(f"UPDATE \"{t}\" SET body = 'written past capture' WHERE id = 7")
        assert world.pending() == 0
        producer = Producer(world.settings)
        try:
            assert producer.index_record(c, 7)
            world.wait_caught_up("the app's enqueue")
            samples = wait_for(lambda: app_change_scraped(port, c), timeout=30, what="the app's change in a scrape")
            assert fresh(samples, "count", c, "capture") == 13  # each record once, as it became searchable
            assert fresh(samples, "sum", c, "capture") > 0
            status = json.loads(run_cli(world.config, "status", "--json").stdout)
            [row] = [f for f in status["freshness"] if f["collection"] == c]
            assert row["changes"] == 14 and 0 < row["p50"] <= row["p95"]
            assert status["freshness_error"] is None
            table = run_cli(world.config, "status").stdout
            assert "fresh p95" in table and any(line.split()[:2] == [c, "14"] for line in table.splitlines())

            chunk = sorted(k for k in world.stored() if k.startswith("5:"))[0]
            sql.run(f'DELETE FROM "{world.table}" WHERE id = %s', (chunk,))  # behind the ledger's back
            producer.send(VERIFY, args=(c,), queue=BULK_QUEUE)
            wait_for(
                lambda: scrape(port)[("vectorsync_drifted_records", (("collection", c),))] == 1.0,
                timeout=60,
                what="the sampled verify's verdict in a scrape",
            )
        finally:
            producer.close()
