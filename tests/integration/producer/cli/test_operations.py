"""The operator's view, as a user sees it: `status` (workers, queues, stalled runs, at 80 columns), the warning
when no worker consumes a queue, and the queue gauges; real Redis and RabbitMQ, PostgreSQL with pgvector and
`celery worker` processes (`vectorsync doctor`: test_doctor.py)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
import redis
from celery import Celery

from producer.cli.status import short_ids
from store.broker.config import celery_config
from store.contract import WORKER_COMMAND
from store.settings import Settings, load_settings
from tests.backends import unique_name
from tests.crm import CrmTable, note
from tests.fake_openai import FakeOpenAI
from tests.settings_files import settings_toml
from tests.workers import ROOT, celery_worker, process_env, run_cli, run_on_terminal, wait_for

pytestmark = pytest.mark.slow


@dataclass
class Ops:
    config: Path
    settings: Settings
    collection: str
    crm: CrmTable
    openai: FakeOpenAI

    def variant(self, section: str, url: str) -> Path:
        """A copy of the settings file whose ``[section] url`` is ``url``."""
        text = self.config.read_text()
        if f"[{section}]\n" in text:
            text = re.sub(rf'(\[{section}\]\nurl = )"[^"]*"', rf'\1"{url}"', text)
        else:
            text += f'\n[{section}]\nurl = "{url}"\n'
        path = self.config.with_name(f"{section}_variant.toml")
        path.write_text(text)
        return path


@pytest.fixture(params=["redis", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
def ops(
    request: pytest.FixtureRequest, tmp_path: Path, broker_redis_url: str, scratch_redis_url: str, postgres_url: str
) -> Iterator[Ops]:
    if request.param == "rabbitmq":
        broker = str(request.getfixturevalue("amqp_url"))
    else:
        redis.Redis.from_url(broker_redis_url).flushdb()
        broker = broker_redis_url
    collection = unique_name("ops")
    with FakeOpenAI(dimensions=8) as openai:
        crm = CrmTable(postgres_url, f"crm_{collection}")
        config = tmp_path / "vectorsync.toml"
        text = settings_toml(
            broker=broker,
            cache=scratch_redis_url,
            database=postgres_url,
            openai_url=openai.url,
            table=crm.name,
            collection=collection,
            batch_size=10,
        )
        config.write_text(text.replace("metrics_port = 0", "metrics_port = 0\nstall_seconds = 2"))
        settings = load_settings(config)
        app = Celery(set_as_current=False)
        app.conf.update(celery_config(settings))
        app.control.purge()
        app.close()
        yield Ops(config, settings, collection, crm, openai)
        crm.close()


def test_no_consumer_warning_once_then_the_run_completes_when_a_worker_starts(ops: Ops) -> None:
    ops.crm.insert([note(i) for i in range(1, 31)])
    process = subprocess.Popen(
        [sys.executable, "-m", "producer.cli", "reindex", ops.collection, "--wait"],
        cwd=ROOT,
        env=process_env(ops.config),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        warning = process.stderr.readline()
        assert warning.strip() == (
            f"warning: no worker consumes vectorsync.bulk: the work waits there until one "
            f"does. Start one with `{WORKER_COMMAND}`"
        )
        with celery_worker(ops.config):
            stdout, stderr = process.communicate(timeout=180)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stdout + stderr
    assert "done: 30 records, 30 indexed" in stdout
    assert "no worker consumes" not in stderr  # warned once


def test_index_warns_when_no_worker_consumes_the_live_queue(ops: Ops) -> None:
    result = run_cli(ops.config, "index", ops.collection, "1")
    assert result.returncode == 0 and "enqueued 1 of 1 records" in result.stdout
    assert "warning: no worker consumes vectorsync.live" in result.stderr


def _kill_tree(worker: subprocess.Popen[bytes]) -> None:
    family = [psutil.Process(worker.pid), *psutil.Process(worker.pid).children(recursive=True)]
    for process in family:
        process.send_signal(signal.SIGKILL)
    worker.wait(timeout=10)


def test_a_run_whose_worker_was_killed_is_flagged_stalled_with_the_reason(ops: Ops) -> None:
    ops.crm.insert([note(i) for i in range(1, 401)])
    ops.openai.always(delay=0.2)  # slow enough that the run is mid-way when its worker dies
    producer_run = run_cli(ops.config, "reindex", ops.collection)
    run_id = producer_run.stdout.split()[1]
    with celery_worker(ops.config, concurrency=1) as worker:
        ledger_run = wait_for(lambda: _progress(ops, run_id) > 0, timeout=60, what="some progress")
        assert ledger_run
        _kill_tree(worker)
    time.sleep(ops.settings.worker.stall_seconds + 0.5)
    view = json.loads(run_cli(ops.config, "status", "--json").stdout)
    [run] = [r for r in view["runs"] if r["run_id"] == run_id]
    assert run["status"] == "running"
    assert run["stalled"] == f"no worker consumes vectorsync.bulk: start one with `{WORKER_COMMAND}`"
    bulk = next(q for q in view["queues"] if q["name"] == "vectorsync.bulk")
    assert bulk["depth"] > 0 and bulk["consumers"] == [] and bulk["oldest_seconds"] > 0
    screen = run_on_terminal(ops.config, "status", columns=80)
    assert f"run {run_id[:8]} ({ops.collection}) is stalled: no worker consumes vectorsync.bulk" in " ".join(
        screen.split()
    )
    ops.openai.always()


def _progress(ops: Ops, run_id: str) -> int:
    from store.state.ledger.postgres import PostgresLedger

    ledger = PostgresLedger(ops.settings.state_url)
    try:
        return ledger.run(run_id).processed
    finally:
        ledger.close()


@pytest.mark.parametrize("ops", ["redis"], indirect=True)  # what status draws, whatever the broker
def test_status_fits_80_columns_on_a_terminal_without_cutting_ids(ops: Ops) -> None:
    ops.crm.insert([note(i) for i in range(1, 21)])
    with celery_worker(ops.config, name="a-worker-with-a-rather-long-name"):
        assert run_cli(ops.config, "reindex", ops.collection, "--wait").returncode == 0
        screen = run_on_terminal(ops.config, "status", columns=80)
        view = json.loads(run_cli(ops.config, "status", "--json").stdout)
    lines = [re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", line) for line in screen.splitlines()]
    assert max(len(line.rstrip()) for line in lines) <= 80, "\n".join(lines)
    assert "…" not in screen
    [worker] = view["workers"]
    assert worker["name"].startswith("a-worker-with-a-rather-long-name@") and worker["queues"] == [
        "vectorsync.bulk",
        "vectorsync.live",
    ]
    assert "a-worker-with-a-rather-long-na" in screen  # wrapped inside its cell if need be, never cut short
    run = view["runs"][0]
    assert run["collection"] == ops.collection and run["status"] == "done"
    shown = short_ids([r["run_id"] for r in view["runs"]])[run["run_id"]]
    assert re.search(rf"^ ?{shown}\s", "\n".join(lines), re.M)  # the id's unique prefix, whole, in its column
    single = run_cli(ops.config, "status", shown)
    assert single.returncode == 0 and "done 20, unchanged 0, failed 0" in single.stdout
