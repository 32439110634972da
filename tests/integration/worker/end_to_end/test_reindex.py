"""Reindexes end to end, through real workers and the CLI: a first load, a reindex that skips what is unchanged,
incremental updates, a full reindex that drops gone records, a fan-out in steps, the progress a terminal draws, and
a dropped collection coming back."""

from __future__ import annotations

import random
import time

import pytest
import redis
import sqlalchemy as sa

from store.connect.postgres import engine_url
from store.contract import BULK_QUEUE
from store.state.ledger import RunStatus
from tests.crm import note
from tests.integration.worker.end_to_end.world import World, reindex_and_wait
from tests.workers import celery_worker, run_cli, run_on_terminal, wait_for

pytestmark = pytest.mark.slow


def test_reindex_then_skip_then_incremental_updates(world: World) -> None:
    world.crm.insert([note(i) for i in range(1, 1001)])
    with celery_worker(world.config):
        pushed = world.settings.vectors.table_prefix + world.collection + "_pushed"  # declared, never indexed
        wait_for(lambda: _has_table(world, pushed), timeout=30, what="the worker's start to create its collections")
        result = reindex_and_wait(world)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "done: 1000 records, 1000 indexed, 0 unchanged, 0 failed" in result.stdout
        assert world.in_sync()
        assert _has_vector_index(world)  # deferred for the bulk load, built when the run was done
        calls = world.openai.calls
        assert calls > 0

        last_write = _last_write(world)
        again = reindex_and_wait(world)
        assert "done: 1000 records, 0 indexed, 1000 unchanged, 0 failed" in again.stdout
        assert world.openai.calls == calls  # no embedding call
        assert _last_write(world) == last_write  # no write

        rng = random.Random(5)
        edited = rng.sample(range(1, 1001), 60)
        for i in edited[:50]:
            world.crm.update(i, body=note(i, version=1)["body"])
        world.crm.delete(edited[50:])
        world.crm.insert([note(i) for i in range(1001, 1006)])
        producer = world.producer()
        for i in [*edited, *range(1001, 1006)]:
            producer.index_record(world.collection, i)
        wait_for(world.in_sync, timeout=120, what="the store to follow 50 edits, 10 deletes and 5 inserts")
        producer.close()


def _has_vector_index(world: World) -> bool:
    engine = sa.create_engine(engine_url(world.database))
    names = {i["name"] for i in sa.inspect(engine).get_indexes(world.table)}
    engine.dispose()
    return f"{world.table}_embedding_idx" in names


def _has_table(world: World, table: str) -> bool:
    engine = sa.create_engine(engine_url(world.database))
    found = sa.inspect(engine).has_table(table)
    engine.dispose()
    return found


def _last_write(world: World) -> tuple[object, ...]:
    engine = sa.create_engine(engine_url(world.database))
    with engine.connect() as conn:
        row = conn.execute(sa.text(f'SELECT max(updated_at), count(*) FROM "{world.table}"')).one()
        ledger = conn.execute(
            sa.text("SELECT max(indexed_at) FROM vectorsync_ledger WHERE collection = :c"), {"c": world.collection}
        ).scalar_one()
    engine.dispose()
    return (*row, ledger)


@pytest.mark.parametrize("broker", ["redis"], indirect=True)  # the ledger's sweep
def test_full_reindex_removes_gone_records_and_refuses_to_empty(world: World) -> None:
    world.crm.insert([note(i) for i in range(1, 31)])
    with celery_worker(world.config):
        assert reindex_and_wait(world).returncode == 0
        world.crm.delete(list(range(1, 11)))
        assert reindex_and_wait(world, "--full").returncode == 0
        assert world.in_sync()
        world.crm.delete(list(range(11, 31)))
        refused = reindex_and_wait(world, "--full")
        assert refused.returncode == 1 and "would empty the collection" in refused.stdout
        assert len(world.stored()) > 0
        assert reindex_and_wait(world, "--full", "--allow-empty").returncode == 0
        assert world.stored() == {}


@pytest.mark.parametrize("broker", ["redis"], indirect=True)  # the queue's length is read in Redis
def test_a_reindex_keeps_a_step_of_batches_queued_however_big_its_source(world: World, broker: str) -> None:
    """A first load of 40 pages fanned out 2 pages a step: sampled every few milliseconds, the bulk queue never
    holds more than a step's 2 batches, the next step, and the run's pool batch or index build (all 40 batches
    at once before the fan-out went in steps); the run ends done with the store equal to the source."""
    world.config.write_text(world.config.read_text().replace("[worker]\n", "[worker]\nfanout_pages = 2\n", 1))
    world.crm.insert([note(i) for i in range(1, 2001)])
    queue, producer = redis.Redis.from_url(broker), world.producer()
    with celery_worker(world.config):
        run_id = producer.reindex_all(world.collection)
        lengths = [0]
        while lengths[-1] or producer.reindex_status(run_id).status == RunStatus.RUNNING:
            for _ in range(20):
                lengths.append(queue.llen(BULK_QUEUE))
                time.sleep(0.005)
        wait_for(lambda: producer.reindex_status(run_id).status == RunStatus.DONE, timeout=60, what="the run")
        assert 0 < max(lengths) <= 4, max(lengths)
        assert world.in_sync()
    producer.close()


@pytest.mark.parametrize("broker", ["redis"], indirect=True)  # what the CLI draws
def test_reindex_wait_draws_a_bar_on_a_terminal_and_lines_on_a_pipe(world: World) -> None:
    world.crm.insert([note(i) for i in range(1, 301)])
    with celery_worker(world.config):
        piped = reindex_and_wait(world)
        assert "/300 (done" in piped.stdout and "━" not in piped.stdout
        screen = run_on_terminal(world.config, "reindex", world.collection, "--wait")
        assert "indexing" in screen and "━" in screen and "300/300" in screen


@pytest.mark.parametrize("broker", ["redis"], indirect=True)  # the store's state, not the broker's
def test_a_dropped_declared_collection_comes_back_on_its_next_reindex(world: World) -> None:
    world.crm.insert([note(i) for i in range(1, 41)])
    with celery_worker(world.config, name="w1"), celery_worker(world.config, name="w2"):
        assert reindex_and_wait(world).returncode == 0
        dropped = run_cli(world.config, "collections", "drop", world.collection, "--yes")
        assert dropped.returncode == 0, dropped.stdout + dropped.stderr
        again = reindex_and_wait(world)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "done: 40 records, 40 indexed, 0 unchanged, 0 failed" in again.stdout
        assert world.in_sync()
