"""The worker system end to end: real Redis (or RabbitMQ), real PostgreSQL+pgvector, real celery workers.

Each test writes a vectorsync.toml, starts ``celery -A worker worker`` processes
with it, drives them through the producer API and the CLI, and checks that the
store ends up exactly equal to the source.
"""

from __future__ import annotations

import math
import random
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa
from celery import Celery

from store.broker.config import celery_config
from store.broker.producer import Producer
from store.connect.postgres import engine_url
from store.contract import BULK_QUEUE, INDEX_RECORD, LIVE_QUEUE
from store.settings import Settings, load_settings
from store.state.ledger import RunStatus
from store.state.ledger.postgres import PostgresLedger
from tests.backends import unique_name
from tests.fake_openai import FakeOpenAI
from tests.services import free_port
from tests.workers import (
    CrmTable,
    celery_worker,
    expected_chunks,
    note,
    run_cli,
    run_on_terminal,
    settings_toml,
    stored_chunks,
    wait_for,
)

pytestmark = pytest.mark.slow


@dataclass
class World:
    """One test's system: its settings file, source table, fake provider and helpers."""

    config: Path
    settings: Settings
    collection: str
    crm: CrmTable
    openai: FakeOpenAI
    database: str

    @property
    def table(self) -> str:
        return self.settings.vectors.table_prefix + self.collection

    def producer(self) -> Producer:
        return Producer(self.settings)

    def expected(self) -> dict[str, tuple[str, dict[str, object]]]:
        return expected_chunks(self.settings, self.collection, self.crm.rows())

    def stored(self) -> dict[str, tuple[str, dict[str, object]]]:
        return stored_chunks(self.database, self.table)

    def in_sync(self) -> bool:
        return self.stored() == self.expected()

    def ledger(self) -> PostgresLedger:
        return PostgresLedger(self.database)


@pytest.fixture(params=["redis", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
def broker(request: pytest.FixtureRequest, broker_redis_url: str) -> str:
    if request.param == "rabbitmq":
        return str(request.getfixturevalue("amqp_url"))
    redis.Redis.from_url(broker_redis_url).flushdb()
    return broker_redis_url


@pytest.fixture
def world(
    tmp_path: Path, broker: str, scratch_redis_url: str, postgres_url: str, request: pytest.FixtureRequest
) -> Iterator[World]:
    cache = scratch_redis_url
    redis.Redis.from_url(cache).flushdb()
    collection = unique_name("notes")
    with FakeOpenAI(dimensions=8) as openai:
        crm = CrmTable(postgres_url, f"crm_{collection}")
        config = tmp_path / "vectorsync.toml"
        config.write_text(
            settings_toml(
                broker=broker,
                cache=cache,
                database=postgres_url,
                openai_url=openai.url,
                table=crm.name,
                collection=collection,
                metrics_port=getattr(request, "param", 0),
                extra=f'[collections.{collection}_pushed.source]\nkind = "push"\n',
            )
        )
        settings = load_settings(config)
        if broker.startswith("amqp"):
            app = Celery(set_as_current=False)
            app.conf.update(celery_config(settings))
            app.control.purge()
            app.close()
        yield World(config, settings, collection, crm, openai, postgres_url)
        crm.close()


def reindex_and_wait(world: World, *extra: str) -> subprocess.CompletedProcess[str]:
    result = run_cli(world.config, "reindex", world.collection, "--wait", *extra)
    assert result.returncode in (0, 1), result.stderr
    return result


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


@pytest.mark.parametrize("broker", ["redis"], indirect=True)  # the fan-out does not depend on the broker
def test_a_one_percent_edit_is_embedded_in_full_provider_calls(world: World) -> None:
    world.crm.insert([note(i) for i in range(1, 401)])
    with celery_worker(world.config):
        assert reindex_and_wait(world).returncode == 0
        _assert_spend_is_what_the_server_counted(world)
        before = set(text for text, _ in world.expected().values())
        edited = random.Random(9).sample(range(1, 401), 4)  # 1%, on different pages of worker.batch_size ids
        for i in edited:
            world.crm.update(i, body=note(i, version=1)["body"])
        new_chunks = {text for text, _ in world.expected().values()} - before
        calls = world.openai.calls
        again = reindex_and_wait(world)
        assert "done: 400 records, 4 indexed, 396 unchanged, 0 failed" in again.stdout, again.stdout
        assert world.in_sync()
    batch = world.settings.embeddings.batch_size
    assert 0 < world.openai.calls - calls <= math.ceil(len(new_chunks) / batch)  # not one call per edited record


@pytest.mark.parametrize("broker", ["redis"], indirect=True)
def test_a_first_load_and_an_edit_that_leaves_updated_at_make_the_fewest_provider_calls(world: World) -> None:
    """Every call full but the run's last: the batches leave a partly filled call to the run's pool. The edit is
    the issue's case: every 50th record by a plain UPDATE that leaves updated_at alone, so each id page's probe
    record no longer hashes as recorded and the page goes whole, one changed record in each batch."""
    records, batch = 2000, world.settings.embeddings.batch_size
    world.crm.insert([note(i) for i in range(1, records + 1)])
    loaded = {text for text, _ in world.expected().values()}
    with celery_worker(world.config):
        first = reindex_and_wait(world)
        assert f"done: {records} records, {records} indexed, 0 unchanged, 0 failed" in first.stdout, first.stdout
        assert world.openai.calls == math.ceil(len(loaded) / batch)
        edited = list(range(1, records + 1, 50))
        with world.crm.engine.begin() as conn:
            for i in edited:
                conn.execute(
                    sa.text(f'UPDATE "{world.crm.name}" SET body = :b WHERE id = :i'),  # test-owned name
                    {"b": note(i, version=1)["body"], "i": i},
                )
        fresh = {text for text, _ in world.expected().values()} - loaded
        calls = world.openai.calls
        again = reindex_and_wait(world)
        assert (
            f"done: {records} records, {len(edited)} indexed, {records - len(edited)} unchanged, 0 failed"
            in again.stdout
        ), again.stdout
        assert world.in_sync()
    assert world.openai.calls - calls == math.ceil(len(fresh) / batch)  # not one call per edited record


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


@pytest.mark.parametrize("broker", ["redis"], indirect=True)  # the pipeline's failures rows
def test_a_record_the_provider_rejects_lands_in_failures_and_retries_once_fixed(world: World) -> None:
    rows = [note(i) for i in range(1, 41)]
    rows[16]["body"] = "this text carries POISON the provider refuses"
    world.crm.insert(rows)
    world.openai.reject_containing = "POISON"
    with celery_worker(world.config):
        result = reindex_and_wait(world)
        assert result.returncode == 1
        assert "done: 40 records, 39 indexed, 0 unchanged, 1 failed" in result.stdout
        [failure] = world.ledger().failures(world.collection)
        assert failure.record_id == "17" and "POISON" in failure.error and "InputError" in failure.error
        listed = run_cli(world.config, "failures")
        assert "17" in listed.stdout and "InputError" in listed.stdout
        expected = world.expected()
        assert world.stored() == {k: v for k, v in expected.items() if not k.startswith("17:")}

        world.crm.update(17, body="now a perfectly ordinary note about the rollout")
        replay = run_cli(world.config, "failures", "--collection", world.collection, "--retry")
        assert "enqueued 1 failed records again" in replay.stdout, replay.stdout + replay.stderr
        wait_for(world.in_sync, timeout=60, what="the fixed record to be indexed")
        wait_for(lambda: not world.ledger().failures(world.collection), timeout=30, what="the failure to clear")


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


@pytest.mark.parametrize("broker", ["redis"], indirect=True)  # what the CLI draws
def test_reindex_wait_draws_a_bar_on_a_terminal_and_lines_on_a_pipe(world: World) -> None:
    world.crm.insert([note(i) for i in range(1, 301)])
    with celery_worker(world.config):
        piped = reindex_and_wait(world)
        assert "/300 (done" in piped.stdout and "━" not in piped.stdout
        screen = run_on_terminal(world.config, "reindex", world.collection, "--wait")
        assert "indexing" in screen and "━" in screen and "300/300" in screen


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


def test_a_live_record_whose_provider_fails_for_a_while_is_retried_and_indexed(world: World) -> None:
    world.crm.insert([note(1)])
    for _ in range(2):  # both tries of the first attempt (embeddings.max_attempts = 2) fail
        world.openai.push(status=500)
    producer = world.producer()
    with celery_worker(world.config, concurrency=1):
        producer.index_record(world.collection, 1)
        wait_for(world.in_sync, timeout=60, what="the record, after its task retried")
    assert world.openai.calls >= 3
    assert world.ledger().failures(world.collection) == []
    producer.close()


@pytest.mark.parametrize("broker", ["redis"], indirect=True)  # the push source
def test_pushed_documents_are_indexed_and_deleted_through_the_worker(world: World, postgres_url: str) -> None:
    pushed = f"{world.collection}_pushed"
    producer = world.producer()
    table = world.settings.vectors.table_prefix + pushed
    with celery_worker(world.config, concurrency=1):
        producer.index_document(
            pushed, "doc-1", "Pricing > Discounts\n\nVolume discounts start at 50 seats.", {"kind": "handbook"}
        )
        stored = wait_for(lambda: stored_chunks(postgres_url, table), timeout=60, what="the pushed document")
        assert stored == {
            "doc-1:0": (
                "Pricing > Discounts\n\nVolume discounts start at 50 seats.",
                {"kind": "handbook", "record_id": "doc-1", "chunk": 0},
            )
        }
        producer.delete_document(pushed, "doc-1")
        wait_for(lambda: stored_chunks(postgres_url, table) == {}, timeout=60, what="the pushed document to go")
        # Reindexing a pushed collection (now empty) is refused before anything is sent, its vector index kept.
        refused = run_cli(world.config, "reindex", pushed, "--wait", "--timeout", "60")
        assert refused.returncode == 2 and "has its records pushed" in refused.stderr, refused.stdout + refused.stderr
        engine = sa.create_engine(engine_url(postgres_url))
        indexes = {i["name"] for i in sa.inspect(engine).get_indexes(table)}
        engine.dispose()
        assert f"{table}_embedding_idx" in indexes
    producer.close()


@pytest.mark.parametrize("broker", ["redis"], indirect=True)  # the clock is the cache's Redis, whatever the broker
def test_an_edit_and_a_delete_from_a_host_whose_clock_is_10s_behind_both_take_effect(
    world: World, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Versions were each sender's time.time_ns(): the slower host's edit and delete counted as older than the
    first send and were dropped as superseded, the old text searchable after both (store.broker.versions)."""
    pushed, table = f"{world.collection}_pushed", world.settings.vectors.table_prefix + f"{world.collection}_pushed"
    ahead, behind = world.producer(), world.producer()
    real = time.time_ns
    with celery_worker(world.config, concurrency=1):
        ahead.index_document(pushed, "doc-1", "The office opens at nine.")
        wait_for(
            lambda: stored_chunks(postgres_url, table).get("doc-1:0", ("",))[0] == "The office opens at nine.",
            timeout=60,
            what="the first send",
        )
        monkeypatch.setattr(time, "time_ns", lambda: real() - 10 * 10**9)
        behind.index_document(pushed, "doc-1", "The office opens at ten.")
        wait_for(
            lambda: stored_chunks(postgres_url, table).get("doc-1:0", ("",))[0] == "The office opens at ten.",
            timeout=60,
            what="the edit sent from the host 10 s behind",
        )
        behind.delete_document(pushed, "doc-1")
        wait_for(lambda: stored_chunks(postgres_url, table) == {}, timeout=60, what="the delete from that host")
    ahead.close()
    behind.close()


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


def _assert_spend_is_what_the_server_counted(world: World) -> None:
    """The first run's spend, written by the workers batch by batch, is the fake server's usage, exactly."""
    ledger = world.ledger()
    try:
        [run] = ledger.recent_runs(1)
        [row] = ledger.run_spend(run.run_id)
    finally:
        ledger.close()
    assert (row.collection, row.model, row.generation, row.counted_by) == (
        world.collection,
        "text-embedding-test",
        1,
        "provider",
    )
    assert (row.tokens, row.calls) == (world.openai.served_tokens, world.openai.served_calls)
    assert row.cost is None  # no price declared
