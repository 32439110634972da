"""The producer against a real Redis broker: coalescing, enqueue-after-commit, import weight, CLI errors."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa
from sqlalchemy.orm import Session

import producer
from producer.client import Producer
from store import ConfigError
from store.client import Client, use_client
from store.contract import INDEX_RECORD, LIVE_QUEUE
from store.settings import CollectionSettings, Settings
from tests.workers import ROOT, run_cli


@pytest.fixture
def broker(scratch_redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(scratch_redis_url)
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture
def sender(
    broker: redis.Redis, scratch_redis_url: str, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Producer]:
    url = scratch_redis_url
    settings = Settings.model_validate({"broker": {"url": url}, "vectors": {"url": postgres_url}})
    client = Client(settings)
    previous = use_client(client)
    yield client.producer
    use_client(previous)
    client.close()


def queued(broker: redis.Redis) -> list[tuple[str, list[object]]]:
    messages = [json.loads(raw) for raw in broker.lrange(LIVE_QUEUE, 0, -1)]
    return [(m["headers"]["task"], json.loads(__import__("base64").b64decode(m["body"]))[0]) for m in messages]


def test_repeated_enqueues_of_a_queued_record_are_coalesced(sender: Producer, broker: redis.Redis) -> None:
    assert sender.index_record("notes", 7) is True
    assert sender.index_record("notes", "7") is False
    assert sender.index_record("notes", 8) is True
    assert sorted(queued(broker)) == [(INDEX_RECORD, ["notes", "7"]), (INDEX_RECORD, ["notes", "8"])]
    sender.coalescer.release("notes", "7")  # what the worker does when the task starts
    assert sender.index_record("notes", 7) is True


def test_enqueue_waits_for_the_session_to_commit(sender: Producer, broker: redis.Redis, postgres_url: str) -> None:
    engine = sa.create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://"))
    with Session(engine) as session:
        session.execute(sa.text("SELECT 1"))
        producer.index_record("notes", 1, session=session)
        assert queued(broker) == []
        session.rollback()
        assert queued(broker) == []  # rolled back: never sent
        producer.index_record("notes", 2, session=session)
        session.commit()
        assert queued(broker) == [(INDEX_RECORD, ["notes", "2"])]
        session.commit()  # a later commit sends nothing again
        assert len(queued(broker)) == 1
    engine.dispose()


def test_a_rolled_back_savepoint_drops_only_what_was_enqueued_inside_it(
    sender: Producer, broker: redis.Redis, postgres_url: str
) -> None:
    engine = sa.create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://"))
    with Session(engine) as session:
        session.execute(sa.text("SELECT 1"))
        producer.index_record("notes", 1, session=session)
        savepoint = session.begin_nested()
        producer.index_record("notes", 2, session=session)
        savepoint.rollback()
        inner = session.begin_nested()
        producer.index_record("notes", 3, session=session)
        inner.commit()  # released: its enqueue waits for the outer commit
        assert queued(broker) == []
        session.commit()
        assert sorted(queued(broker)) == [(INDEX_RECORD, ["notes", "1"]), (INDEX_RECORD, ["notes", "3"])]
    engine.dispose()


def test_pushing_to_a_collection_with_a_source_is_refused(sender: Producer, broker: redis.Redis) -> None:
    sourced = Producer(
        sender.settings.model_copy(
            update={
                "collections": {
                    "notes": CollectionSettings.model_validate({"source": {"kind": "python", "loader": "x:y"}})
                }
            }
        )
    )
    try:
        with pytest.raises(ConfigError, match="reads its records from its python source; index_document"):
            sourced.index_document("notes", 1, "text")
        with pytest.raises(ConfigError, match="use index_record for this one"):
            sourced.delete_document("notes", 1)
    finally:
        sourced.close()
    assert queued(broker) == []


def test_bad_arguments_are_refused_before_anything_is_sent(sender: Producer, broker: redis.Redis) -> None:
    with pytest.raises(ConfigError, match="collection name 'Bad Name' is not allowed"):
        sender.index_record("Bad Name", 1)
    with pytest.raises(ConfigError, match="record id None is not allowed"):
        sender.index_record("notes", None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="cannot be encoded as JSON"):
        sender.index_document("notes", 1, "text", {"when": object()})
    assert queued(broker) == []


def test_reindex_all_returns_a_run_id_whose_status_is_running(sender: Producer, broker: redis.Redis) -> None:
    run_id = sender.reindex_all("notes")
    status = sender.reindex_status(run_id)
    assert (status.status, status.total, status.done, status.skipped, status.failed) == ("running", None, 0, 0, 0)
    assert broker.llen("vectorsync.bulk") == 1


def test_importing_producer_loads_no_heavy_library() -> None:
    code = (
        "import sys, producer; heavy = {'numpy', 'torch', 'qdrant_client', 'openai', 'sentence_transformers', "
        "'worker', 'httpx'} & set(sys.modules); print(sorted(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_cli_errors_are_one_line_without_a_traceback(tmp_path: Path) -> None:
    config = tmp_path / "vectorsync.toml"
    config.write_text('[vectors]\nmetric = "cosin"\n')
    result = run_cli(config, "status")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().startswith("error: bad settings in")
    assert len(result.stderr.strip().splitlines()) == 1 or "vectors.metric" in result.stderr
    bad_filter = run_cli(config, "search", "notes", "hello", "--filter", "{kind")
    assert bad_filter.returncode == 2 and "Traceback" not in bad_filter.stderr


def test_reindex_wait_gives_up_after_its_timeout_when_no_worker_runs(
    tmp_path: Path, broker_redis_url: str, postgres_url: str
) -> None:
    config = tmp_path / "vectorsync.toml"
    config.write_text(
        f'[broker]\nurl = "{broker_redis_url}"\n[vectors]\nurl = "{postgres_url}"\n'
        '[collections.notes.source]\nkind = "python"\n'
        'loader = "tests.unit.worker.pipeline.test_indexer:load_records"\n'
    )
    result = run_cli(config, "reindex", "notes", "--wait", "--timeout", "1")
    assert result.returncode == 3
    assert "is still running; follow it with `vectorsync status" in result.stderr
    redis.Redis.from_url(broker_redis_url).flushdb()
