"""The operator's view, as a user sees it: `vectorsync doctor`, `status` (workers, queues, stalled runs, at
80 columns), the warning when no worker consumes a queue, and the queue gauges; real Redis and RabbitMQ,
PostgreSQL with pgvector and `celery worker` processes."""

from __future__ import annotations

import contextlib
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
from tests.services import REDIS_FORMS, free_port, redis_server, sentinel_group
from tests.settings_files import settings_toml
from tests.workers import ROOT, celery_worker, process_env, run_cli, run_on_terminal, wait_for

pytestmark = pytest.mark.slow
DEAD = f"127.0.0.1:{free_port()}"


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


def doctor_lines(config: Path) -> tuple[int, dict[str, str]]:
    result = run_cli(config, "doctor", timeout=120)
    lines = {}
    for line in result.stdout.splitlines():
        match = re.match(r"(ok|warn|FAIL)\s+(.+?)\s{2,}\s*\d+ ms\s+(.*)", line)
        if match:
            lines[match.group(2).strip()] = f"{match.group(1)} {match.group(3)}"
    return result.returncode, lines


def test_doctor_with_everything_up_then_each_part_down(ops: Ops) -> None:
    with celery_worker(ops.config):
        code, lines = doctor_lines(ops.config)
        assert code == 0, lines
        assert set(lines) == {
            "broker",
            "state database",
            "vector store (pgvector)",
            "cache",
            "model fake_openai",
            "workers",
        }
        assert all(line.startswith("ok ") for line in lines.values()), lines
        assert re.match(r"ok pgvector 0\.(8|9|1\d)\.\d+, \d+ collections", lines["vector store (pgvector)"])
        assert "8 dimensions" in lines["model fake_openai"]
        assert "1 answer (w1@" in lines["workers"] and "vectorsync.bulk,vectorsync.live" in lines["workers"]

        as_json = json.loads(run_cli(ops.config, "doctor", "--json").stdout)
        assert as_json["ok"] is True and {c["status"] for c in as_json["checks"]} == {"ok"}
        if ops.settings.broker.url.startswith("redis"):  # the other parts do not depend on the broker: once
            _each_other_part_down(ops)

    code, lines = doctor_lines(ops.config)  # the worker has stopped
    assert code == 1 and lines["workers"] == f"FAIL no worker answers a ping → fix: start one: {WORKER_COMMAND}"

    code, lines = doctor_lines(ops.variant("broker", f"redis://{DEAD}/0"))
    assert (
        code == 1
        and lines["broker"].startswith("FAIL")
        and "fix: start the broker, or fix broker.url" in lines["broker"]
    )
    assert lines["workers"].startswith("FAIL not asked: the broker is down")


def _each_other_part_down(ops: Ops) -> None:
    ops.openai.push(status=401, message="Incorrect API key provided")
    code, lines = doctor_lines(ops.config)
    assert code == 1
    assert lines["model fake_openai"].startswith("FAIL PermanentError: model 'text-embedding-test'")
    assert "fix: check models.fake_openai" in lines["model fake_openai"]

    variants = {
        "cache": ("cache", f"redis://{DEAD}/0", 0, "warn", "fix: start Redis or fix cache.url"),
        "state database": ("state", f"postgresql://{DEAD}/x", 1, "FAIL", "fix: start PostgreSQL"),
        "flower": ("flower", f"http://{DEAD}", 0, "warn", "fix: start Flower"),
    }
    for part, (section, url, expected_code, status, fix) in variants.items():
        code, lines = doctor_lines(ops.variant(section, url))
        assert code == expected_code, (part, lines)
        assert lines[part].startswith(status) and fix in lines[part], lines[part]
    store_down = ops.variant("state", ops.settings.vectors.url or "")  # the state stays where it is ...
    store_down.write_text(
        re.sub(
            r'(\[vectors\]\nstore = "pgvector"\nurl = )"[^"]*"', rf'\1"postgresql://{DEAD}/x"', store_down.read_text()
        )
    )  # ... the store is gone
    code, lines = doctor_lines(store_down)
    assert code == 1 and lines["state database"].startswith("ok")
    assert (
        lines["vector store (pgvector)"].startswith("FAIL")
        and "fix: start it, or fix vectors.url" in lines["vector store (pgvector)"]
    )


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


@pytest.mark.parametrize("form", [*REDIS_FORMS, "unix", "sentinel", "memory"])
def test_doctor_reaches_every_form_of_broker_and_says_how_it_hands_tasks_over(tmp_path: Path, form: str) -> None:
    """TLS verifying the server, a Unix socket in both spellings, a Sentinel's master: doctor connects as the
    workers do and says the take is atomic; a broker vectorsync does not test is a warning that says so."""
    with contextlib.ExitStack() as stack:
        if form == "sentinel":
            url = stack.enter_context(sentinel_group(tmp_path / "sentinel")).url
        elif form == "memory":
            url = "memory://"
        else:
            url, _ = stack.enter_context(redis_server(form="socket" if form == "unix" else form, folder=tmp_path))
            url = url.replace("redis+socket://", "unix://") if form == "unix" else url
        config = tmp_path / "vectorsync.toml"
        config.write_text(f'[broker]\nurl = "{url}"\n\n[cache]\nurl = "memory://"\n')
        _code, lines = doctor_lines(config)
    if form == "memory":
        assert lines["broker"].startswith("warn memory://: kombu's own 'memory' transport, untested"), lines
        assert "fix: use a Redis or RabbitMQ broker" in lines["broker"]
        return
    where = {"tcp": "TCP", "tls": "TLS", "socket": "a Unix socket", "unix": "a Unix socket"}.get(form, "the master")
    assert lines["broker"].startswith("ok "), lines
    assert f"Redis over {where}" in lines["broker"] and lines["broker"].endswith("tasks taken atomically"), lines
