"""An index build longer than a task's time limit, through a real worker and PostgreSQL (store.vectors.pgvector.
building, worker.tasks.reindex.build_index): the build goes on in PostgreSQL while tasks wait for it in steps, so it
ends ``done`` when it can and ``failed`` at ``worker.index_time_limit``, started once, never looping.

The build is made longer than the task's limit by a lock the test holds on the table (SHARE UPDATE EXCLUSIVE:
CREATE INDEX waits for it), released when the test has seen tasks hand the waiting over."""

from __future__ import annotations

import json
import logging
import random
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa
import typer
from celery import Celery

from producer.cli.progress import follow
from store.broker.config import celery_config
from store.broker.producer import Producer
from store.connect.postgres import engine_url
from store.contract import BUILD_INDEX, BULK_QUEUE, RunStatus
from store.settings import load_settings
from store.state.ledger import RunProgress
from store.state.ledger.postgres import PostgresLedger
from store.vectors import VectorRecord
from store.vectors.backends import open_store
from store.vectors.pgvector.building import BuildProgress, IndexBuild, read_progress
from store.vectors.pgvector.schema import bulk_indexes
from store.vectors.pgvector.table import PgvectorCollection
from tests.backends import unique_name
from tests.crm import Psql
from tests.settings_files import worker_sections
from tests.workers import celery_worker, run_cli, wait_for

#: A task's limit of 4 s (an attempt waits 2 s of it); the build's own limit per test.
LIMITS = {"time_limit": 4, "visibility_timeout": 6}
ROWS = 200


def _config(tmp_path: Path, broker: str, database: str, collection: str, index_time_limit: int) -> Path:
    config = tmp_path / "vectorsync.toml"
    head = worker_sections(broker=broker, database=database, dimensions=8, **LIMITS, index_time_limit=index_time_limit)
    config.write_text(f'{head}\n[embeddings]\ncache_ttl_days = 0\n[collections.{collection}.source]\nkind = "push"\n')
    return config


def _indexing_run(config: Path, database: str, collection: str) -> str:
    """A collection loaded without its indexes (as a first load leaves it) and its run, ``indexing``."""
    settings = load_settings(config)
    rng = random.Random(7)
    with open_store(settings) as store:
        target = store.get_collection(collection, create=True)
        assert target.defer_index()
        target.upsert_many(
            [
                VectorRecord(f"r{i}:0", [rng.random() for _ in range(8)], f"note {i}", {"record_id": f"r{i}"})
                for i in range(ROWS)
            ]
        )
    ledger = PostgresLedger(database)
    try:
        run_id = ledger.create_run(collection)
        ledger.defer_index(run_id)
        ledger.set_run_total(run_id, total=ROWS, batches=1)
        assert ledger.finish_batch(run_id, 0, done=ROWS, skipped=0, failed=0).status == RunStatus.INDEXING
    finally:
        ledger.close()
    return run_id


@contextmanager
def _table_locked(database: str, table: str) -> Iterator[Psql]:
    """The table locked as a long VACUUM or another index build would: writes go on, CREATE INDEX waits."""
    sql = Psql(database)
    try:
        with sql.transaction():
            sql.run(f'LOCK TABLE "{table}" IN SHARE UPDATE EXCLUSIVE MODE')
            yield sql
    finally:
        sql.close()


def _send_build(config: Path, collection: str, run_id: str) -> None:
    app = Celery("vectorsync-test", set_as_current=False)
    app.conf.update(celery_config(load_settings(config)))
    try:
        app.send_task(BUILD_INDEX, args=(collection, run_id), queue=BULK_QUEUE)
    finally:
        app.close()


def _log(config: Path) -> str:
    return (config.parent / "w1.log").read_text(errors="replace")


def _builds_started(config: Path, table: str) -> list[str]:
    """The indexes whose build a task started, once per start (the worker's log says each)."""
    return re.findall(rf"building ({re.escape(table)}_\w+) of ", _log(config))


def _attempts_handed_over(config: Path) -> int:
    return len(re.findall(r"vectorsync\.build_index\[[0-9a-f-]+\] succeeded in [0-9.]+s: 'indexing'", _log(config)))


def _run(database: str, run_id: str) -> RunProgress:
    ledger = PostgresLedger(database)
    try:
        return ledger.run(run_id)
    finally:
        ledger.close()


def _progress(database: str, table: str) -> BuildProgress | None:
    """The build's progress as ``status`` reads it."""
    engine = sa.create_engine(engine_url(database))
    try:
        with engine.connect() as conn:
            return read_progress(conn, table)
    finally:
        engine.dispose()


def _shows_the_build(config: Path, run_id: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``status`` (and its JSON) and ``reindex --wait``'s progress lines show the build and where it is."""
    shown = run_cli(config, "status", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["index_builds"][run_id]["phase"] == "waiting for a lock"
    assert "builds its index: waiting for a lock, " in run_cli(config, "status").stdout
    producer = Producer(load_settings(config))
    try:
        with pytest.raises(typer.Exit):
            follow(producer, run_id, timeout=1)  # still running after 1 s: it gives up, having printed its line
    finally:
        producer.close()
    line = f"run {run_id}: 200/200 (done 200, skipped 0, failed 0) indexing; building the vector index: waiting for a "
    assert line in capsys.readouterr().out


def _indexes(database: str, table: str) -> set[str]:
    sql = Psql(database)
    try:
        return {r[0] for r in sql.run("SELECT indexname FROM pg_indexes WHERE tablename = %s", (table,))}
    finally:
        sql.close()


def test_a_build_longer_than_a_tasks_time_limit_goes_on_in_postgresql_and_its_run_ends_done(
    tmp_path: Path, broker_redis_url: str, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the task was killed at its limit, redelivered and started the build again, forever."""
    redis.Redis.from_url(broker_redis_url).flushdb()
    collection = unique_name("built")
    config = _config(tmp_path, broker_redis_url, postgres_url, collection, index_time_limit=120)
    table = load_settings(config).vectors.table_prefix + collection
    run_id = _indexing_run(config, postgres_url, collection)
    with celery_worker(config, concurrency=1):
        with _table_locked(postgres_url, table):
            _send_build(config, collection, run_id)
            wait_for(lambda: _attempts_handed_over(config) >= 2, timeout=60, what="two attempts to hand over")
            progress = _progress(postgres_url, table)
            assert progress is not None and progress.phase == "waiting for a lock"
            assert _run(postgres_url, run_id).status == RunStatus.INDEXING
            _shows_the_build(config, run_id, capsys)
        wait_for(lambda: _run(postgres_url, run_id).status.ended, timeout=60, what="the run to end")
    run = _run(postgres_url, run_id)
    assert run.status == RunStatus.DONE, run.error
    assert f"{table}_embedding_idx" in _indexes(postgres_url, table)
    # The vector index's build adopted by every later attempt, never started again; the other indexes once each.
    started = _builds_started(config, table)
    assert started[0] == f"{table}_embedding_idx" and sorted(started) == sorted(set(started)) and len(started) == 4


def test_a_build_that_cannot_end_within_index_time_limit_fails_its_run_once_naming_the_setting(
    tmp_path: Path, broker_redis_url: str, postgres_url: str
) -> None:
    broker = redis.Redis.from_url(broker_redis_url)
    broker.flushdb()
    collection = unique_name("unbuilt")
    config = _config(tmp_path, broker_redis_url, postgres_url, collection, index_time_limit=5)
    table = load_settings(config).vectors.table_prefix + collection
    run_id = _indexing_run(config, postgres_url, collection)
    with celery_worker(config, concurrency=1), _table_locked(postgres_url, table):
        _send_build(config, collection, run_id)
        wait_for(lambda: _run(postgres_url, run_id).status.ended, timeout=60, what="the run to end")
        run = _run(postgres_url, run_id)
        assert run.status == RunStatus.FAILED
        assert "not built within worker.index_time_limit (5 s)" in run.error
        assert _builds_started(config, table) == [f"{table}_embedding_idx"]
        assert broker.llen(BULK_QUEUE) == 0  # no attempt left to wait again: the run is over
    assert f"{table}_embedding_idx" not in _indexes(postgres_url, table)


def test_an_index_a_finished_build_made_after_it_was_looked_for_is_not_built_again(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: a task read the missing indexes, a build left by an earlier task committed and let its lock go,
    and the task took the lock and started the vector index again (seen once in CI under load)."""
    collection = unique_name("rebuilt")
    settings = load_settings(None).model_copy(
        update={"vectors": load_settings(None).vectors.model_copy(update={"url": postgres_url, "dimensions": 8})}
    )
    with open_store(settings) as store:
        target = store.get_collection(collection, create=True)
        assert isinstance(target, PgvectorCollection) and target.defer_index()
        target.upsert_many([VectorRecord(f"r{i}:0", [float(i % 5 + 1)] * 8, f"note {i}") for i in range(20)])
        engine = sa.create_engine(engine_url(postgres_url))
        try:
            build = IndexBuild(engine, target.table.name, bulk_indexes(target.table), settings={})
            vector_index = build.indexes[0]
            vector_index.create(engine)  # the earlier task's build, committed
            stale = [list(build.indexes)]  # what this task read before that commit
            looked_up = IndexBuild._missing
            monkeypatch.setattr(IndexBuild, "_missing", lambda self: stale.pop() if stale else looked_up(self))
            with caplog.at_level(logging.INFO, logger="store.vectors.pgvector.building"):
                assert build.run(until=time.monotonic() + 60, deadline=time.time() + 60, limit=60)
            built = re.findall(r"building (\S+) of ", caplog.text)
            assert str(vector_index.name) not in built and len(built) == len(build.indexes) - 1
            assert build._missing() == []
        finally:
            engine.dispose()
        store.drop_collection(collection)
