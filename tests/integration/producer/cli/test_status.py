"""`vectorsync status` with work queued and no worker: the run is flagged stalled at once, not after
``worker.stall_seconds``. A real Redis broker, PostgreSQL with pgvector, and no ``celery worker`` at all.

The other stall rules (a worker killed mid-run; queued work that workers do not take) are in test_operations.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import redis

from store.contract import BULK_QUEUE, WORKER_COMMAND
from store.settings import Settings, WorkerSettings, default, load_settings
from tests.backends import unique_name
from tests.crm import CrmTable, note
from tests.settings_files import settings_toml
from tests.workers import run_cli, run_on_terminal

NO_CONSUMER = f"no worker consumes {BULK_QUEUE}: start one with `{WORKER_COMMAND}`"


@dataclass
class Idle:
    config: Path
    settings: Settings
    collection: str


@pytest.fixture
def idle(tmp_path: Path, broker_redis_url: str, scratch_redis_url: str, postgres_url: str) -> Iterator[Idle]:
    """Settings over a broker nobody consumes (emptied first) and a source of 30 notes; the default stall_seconds."""
    redis.Redis.from_url(broker_redis_url).flushdb()
    collection = unique_name("stall")
    crm = CrmTable(postgres_url, f"crm_{collection}")
    crm.insert([note(i) for i in range(1, 31)])
    config = tmp_path / "vectorsync.toml"
    config.write_text(
        settings_toml(
            broker=broker_redis_url,
            cache=scratch_redis_url,
            database=postgres_url,
            openai_url="http://127.0.0.1:9/v1",
            table=crm.name,
            collection=collection,
        )
    )
    try:
        yield Idle(config, load_settings(config), collection)
    finally:
        crm.close()


def test_a_run_whose_queue_no_worker_consumes_is_flagged_stalled_at_once(idle: Idle) -> None:
    assert idle.settings.worker.stall_seconds == default(WorkerSettings, "stall_seconds") == 300
    assert run_cli(idle.config, "init").returncode == 0
    started = time.monotonic()
    reindex = run_cli(idle.config, "reindex", idle.collection)
    assert reindex.returncode == 0, reindex.stdout + reindex.stderr
    run_id = reindex.stdout.split()[1]

    view = json.loads(run_cli(idle.config, "status", "--json").stdout)
    [run] = [r for r in view["runs"] if r["run_id"] == run_id]
    assert run["status"] == "running" and run["processed"] == 0
    assert run["stalled"] == NO_CONSUMER
    [bulk] = [q for q in view["queues"] if q["name"] == BULK_QUEUE]
    assert bulk["depth"] == 1 and bulk["consumers"] == []  # the reindex_all task, waiting
    assert view["workers"] == []

    screen = " ".join(run_on_terminal(idle.config, "status", columns=80).split())
    assert f"run {run_id[:8]} ({idle.collection}) is stalled: {NO_CONSUMER}" in screen
    assert time.monotonic() - started < idle.settings.worker.stall_seconds / 5  # seconds, not stall_seconds


def test_status_shows_each_runs_tokens_and_cost_from_one_read_of_the_ledger(idle: Idle) -> None:
    from store.calls.spend import Spend
    from store.state.ledger.postgres import PostgresLedger

    assert run_cli(idle.config, "init").returncode == 0
    assert idle.settings.state_url
    ledger = PostgresLedger(idle.settings.state_url)
    try:
        priced, estimated = ledger.create_run(idle.collection), ledger.create_run(idle.collection)
        row = Spend(
            run_id=priced, collection=idle.collection, model="m", generation=1, tokens=1500, calls=2, cost=0.0123,
            counted_by="provider",
        )  # fmt: skip
        ledger.add_spend([row, replace(row, run_id=estimated, cost=None, counted_by="estimate")])
    finally:
        ledger.close()
    view = json.loads(run_cli(idle.config, "status", "--json").stdout)
    runs = {r["run_id"]: r["spend"] for r in view["runs"]}
    assert runs[priced] == {"tokens": 1500, "calls": 2, "cost": 0.0123, "counted_by": "provider", "estimate": False}
    assert runs[estimated] == {"tokens": 1500, "calls": 2, "cost": None, "counted_by": "estimate", "estimate": True}
    screen = " ".join(run_on_terminal(idle.config, "status", estimated[:12], columns=80).split())
    assert "tokens 1,500 estimate, cost -" in screen
    screen = " ".join(run_on_terminal(idle.config, "status", priced[:12], columns=80).split())
    assert "tokens 1,500, cost 0.0123" in screen
