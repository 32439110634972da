"""Flower watching a real worker: its HTTP API lists the worker, its queues and the tasks it ran; Ctrl-C stops it
within seconds, inspect calls in flight or not.

One real ``celery -A worker worker`` (a Redis database of its own, PostgreSQL with pgvector, a
fake OpenAI server) and one real ``python -m worker.runtime.flower`` (behind a login) are started for the module;
tasks go through ``store.broker.producer.Producer`` as app code sends them, and are read
back from Flower's ``/api/workers`` and ``/api/tasks``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from producer.cli.dev.harness import flower_command
from store.broker.producer import Producer
from store.contract import BULK_QUEUE, INDEX_BATCH, INDEX_RECORD, LIVE_QUEUE, POOL_BATCH, REINDEX_ALL
from store.settings import load_settings
from store.state.ledger import RunStatus
from tests.backends import unique_name
from tests.crm import CrmTable, stored_chunks
from tests.fake_openai import FakeOpenAI
from tests.services import free_port, redis_server
from tests.settings_files import settings_toml
from tests.workers import ROOT, celery_worker, child_env, process_env, wait_for

# One worker and one Flower serve the module: its tests stay on one xdist worker, started once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("flower")]

WORKER = "flowerw"
ROWS = 5
BATCH = 2  # worker.batch_size: a reindex of 5 rows, one of them indexed already, sends 2 index_batch tasks
LOGIN = "ops:flower-test-password"
#: Seconds Flower gets to exit after Ctrl-C. Before worker/runtime/flower.py ran it with daemon threads, it first
#: finished every inspect broadcast in flight or queued (each ``inspect_timeout`` long): past 20 s in a loaded CI run.
STOP_SECONDS = 5.0
#: Flower's inspect_timeout (ms) in the Ctrl-C tests: far longer than STOP_SECONDS, so a Flower that waits for its
#: broadcasts cannot pass.
SLOW_INSPECT_MS = 15_000


@dataclass
class Flower:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def get(self, path: str, *, timeout: float = 10) -> Any:
        request = urllib.request.Request(self.url + path)
        request.add_header("Authorization", "Basic " + base64.b64encode(LOGIN.encode()).decode())
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


@dataclass
class System:
    flower: Flower
    worker_name: str
    collection: str
    run_id: str
    config: Path


def _flower_env(config: Path) -> dict[str, str]:
    env = {k: v for k, v in process_env(config).items() if not k.startswith("FLOWER_")}
    env["FLOWER_BASIC_AUTH"] = LOGIN  # python -m worker.runtime.flower starts only behind a login
    return env


def _start_flower(
    config: Path, log_path: Path, *options: str, dev: bool = False, sigint_ignored: bool = False
) -> Flower:
    """``python -m worker.runtime.flower`` (``dev``: the command ``vectorsync dev`` runs) on a free port of 127.0.0.1,
    once it answers /healthcheck. ``sigint_ignored``: started as a parent that ignores SIGINT leaves it."""
    port = free_port()
    base = (
        flower_command(port)
        if dev
        else [sys.executable, "-m", "worker.runtime.flower", f"--port={port}", "--address=127.0.0.1"]
    )
    command = [*base, *options]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=_flower_env(config),
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_ignore_sigint if sigint_ignored else None,
        )
    flower = Flower(f"http://127.0.0.1:{port}", process, log_path)
    try:
        wait_for(lambda: _answers(flower), timeout=30, what="flower to answer /healthcheck")
    except BaseException:
        process.kill()
        process.wait(timeout=10)
        raise
    return flower


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def _answers(flower: Flower) -> bool:
    if flower.process.poll() is not None:
        raise AssertionError(f"flower exited with {flower.process.returncode}: {flower.output()}")
    try:
        with urllib.request.urlopen(flower.url + "/healthcheck", timeout=2) as response:
            return response.read() == b"OK"
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _stop_flower(flower: Flower, sig: signal.Signals = signal.SIGINT) -> tuple[int, float]:
    """Ctrl-C (or ``sig``), and nothing else: Flower's exit code and the seconds it took. Fails when it is still
    running STOP_SECONDS later (then it is killed)."""
    process = flower.process
    started = time.monotonic()
    process.send_signal(sig)
    try:
        process.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        dispositions = _signal_dispositions(process.pid)
        process.kill()
        process.wait(timeout=10)
        raise AssertionError(
            f"flower still ran {STOP_SECONDS:g}s after {sig.name} ({dispositions}): {flower.output()}"
        ) from None
    return process.returncode, time.monotonic() - started


def _signal_dispositions(pid: int) -> str:
    """The signals a process ignores and blocks, as /proc shows them (masks in hex)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError as exc:
        return f"no /proc status: {exc}"
    return ", ".join(line.replace("\t", " ") for line in status if line.startswith(("SigIgn", "SigBlk")))


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory, scratch_redis_url: str, postgres_url: str) -> Iterator[System]:
    folder = tmp_path_factory.mktemp("flower")
    broker = scratch_redis_url
    redis.Redis.from_url(broker).flushdb()
    collection = unique_name("flower")
    with FakeOpenAI(dimensions=8) as openai:
        crm = CrmTable(postgres_url, f"crm_{collection}")
        crm.insert(
            [
                {"id": i, "title": f"Note {i}", "body": f"call about the rollout number {i}", "kind": "call"}
                for i in range(1, ROWS + 1)
            ]
        )
        config = folder / "vectorsync.toml"
        config.write_text(
            settings_toml(
                broker=broker,
                cache=broker,
                database=postgres_url,
                openai_url=openai.url,
                table=crm.name,
                collection=collection,
                batch_size=BATCH,
            )
        )
        settings = load_settings(config)
        with celery_worker(config, concurrency=1, name=WORKER):
            flower = _start_flower(config, folder / "flower.log")
            try:
                # Flower records only the events it receives: wait until the worker's heartbeats arrive.
                worker_name = wait_for(
                    lambda: next(
                        (
                            name
                            for name, alive in flower.get("/api/workers?status=true").items()
                            if name.startswith(f"{WORKER}@") and alive
                        ),
                        None,
                    ),
                    timeout=30,
                    what="flower to receive the worker's heartbeat",
                )
                producer = Producer(settings)
                try:
                    assert producer.index_record(collection, 1)
                    table = settings.vectors.table_prefix + collection
                    wait_for(lambda: "1:0" in stored_chunks(postgres_url, table), timeout=30, what="record 1")
                    run_id = producer.reindex_all(collection)  # record 1 is unchanged: not sent again
                    wait_for(
                        lambda: producer.reindex_status(run_id).status is RunStatus.DONE,
                        timeout=30,
                        what=f"reindex run {run_id} to finish",
                    )
                finally:
                    producer.close()
                yield System(flower, worker_name, collection, run_id, config)
            finally:
                code, _ = _stop_flower(flower)
        crm.close()
    assert code == 0, f"flower exited with {code} after SIGINT: {flower.output()}"


def _tasks(flower: Flower) -> dict[str, dict[str, Any]]:
    return flower.get("/api/tasks")


def test_flower_lists_the_worker_with_both_queues_and_the_task_names(system: System) -> None:
    workers = system.flower.get("/api/workers?refresh=true")
    assert system.worker_name in workers, f"flower lists {sorted(workers)}, not {system.worker_name}"
    info = workers[system.worker_name]
    queues = {queue["name"] for queue in info["active_queues"]}
    assert queues == {LIVE_QUEUE, BULK_QUEUE}
    assert {INDEX_RECORD, INDEX_BATCH, REINDEX_ALL} <= set(info["registered"])
    assert info["stats"]["pool"]["max-concurrency"] == 1


def test_flower_lists_the_tasks_with_readable_names_and_arguments(system: System) -> None:
    def finished() -> dict[str, list[dict[str, Any]]] | None:
        by_name: dict[str, list[dict[str, Any]]] = {}
        for task in _tasks(system.flower).values():
            by_name.setdefault(task["name"], []).append(task)
        done = {name: [t for t in tasks if t["state"] == "SUCCESS"] for name, tasks in by_name.items()}
        # The run's batches, and its pool batch (worker.pipeline.leftovers: the cache's Redis holds a leftover pool).
        expected = {INDEX_RECORD: 1, REINDEX_ALL: 1, INDEX_BATCH: -(-(ROWS - 1) // BATCH) + 1}
        return done if all(len(done.get(n, [])) == count for n, count in expected.items()) else None

    # What is checked is what Flower shows, not how soon: on 2 cores running the suite on -n 4 the tasks and their
    # events took over 20 s (twice in fresh-clone CI runs).
    tasks = wait_for(finished, timeout=90, what="flower to list every task as SUCCESS")
    assert set(tasks) == {INDEX_RECORD, REINDEX_ALL, INDEX_BATCH}, sorted(tasks)
    for task in (t for group in tasks.values() for t in group):
        assert task["worker"] == system.worker_name
        assert system.collection in task["args"], task
    (record,) = tasks[INDEX_RECORD]
    assert record["args"] == repr((system.collection, "1")), record["args"]
    assert record["routing_key"] == LIVE_QUEUE
    (reindex,) = tasks[REINDEX_ALL]
    assert system.run_id in reindex["args"], reindex["args"]
    assert reindex["routing_key"] == BULK_QUEUE
    pool_batches = [t for t in tasks[INDEX_BATCH] if f"'batch': {POOL_BATCH}" in t["kwargs"]]
    assert len(pool_batches) == 1 and pool_batches[0]["args"] == repr((system.collection, [])), pool_batches
    assert pool_batches[0]["routing_key"] == BULK_QUEUE  # sent by the reindex or by the run's last batch
    for batch in (t for t in tasks[INDEX_BATCH] if t not in pool_batches):
        assert batch["routing_key"] == BULK_QUEUE
        assert batch["parent_id"] == reindex["uuid"]  # fanned out by the reindex
        assert system.run_id in batch["kwargs"], batch["kwargs"]
    ids = sorted(i for t in tasks[INDEX_BATCH] for i in range(1, ROWS + 1) if repr(str(i)) in t["args"])
    assert ids == list(range(2, ROWS + 1)), [t["args"] for t in tasks[INDEX_BATCH]]  # changed ones, in full batches

    one = system.flower.get(f"/api/task/info/{record['uuid']}")
    assert (one["name"], one["state"], one["worker"]) == (INDEX_RECORD, "SUCCESS", system.worker_name)


def _refresh_in_background(flower: Flower) -> list[threading.Thread]:
    """Requests that make Flower broadcast its inspect calls (stats, active_queues, registered, conf), each
    waiting ``--inspect_timeout`` for replies; some are queued behind the others in Flower's thread pool."""

    def refresh() -> None:
        # Flower stops before it answers: that is the point.
        with contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError):
            flower.get("/api/workers?refresh=true", timeout=SLOW_INSPECT_MS / 1000 * 3)

    threads = [threading.Thread(target=refresh, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    return threads


@pytest.mark.parametrize("workers", ["present", "absent"])
@pytest.mark.parametrize("entry", ["python -m worker.runtime.flower", "vectorsync dev"])
def test_flower_stops_within_seconds_of_ctrl_c_while_inspect_calls_are_in_flight(
    system: System, workers: str, entry: str, tmp_path: Path
) -> None:
    """Ctrl-C for ``python -m worker.runtime.flower``; SIGTERM, what ``vectorsync dev`` sends its children, for its
    Flower. Either stops it within STOP_SECONDS though its inspect broadcasts wait SLOW_INSPECT_MS."""
    dev = entry == "vectorsync dev"
    with contextlib.ExitStack() as stack:
        config = system.config
        if workers == "absent":  # a broker no worker listens to: every broadcast waits its whole timeout
            url, _ = stack.enter_context(redis_server())
            config = tmp_path / "vectorsync.toml"
            config.write_text(system.config.read_text().replace(load_settings(system.config).broker.url, url))
        flower = _start_flower(config, tmp_path / "flower.log", f"--inspect_timeout={SLOW_INSPECT_MS}", dev=dev)
        sig = signal.SIGTERM if dev else signal.SIGINT
        try:
            pending = _refresh_in_background(flower)
            time.sleep(1.0)  # the broadcasts are out; their replies are awaited for SLOW_INSPECT_MS
            assert all(thread.is_alive() for thread in pending), "an inspect call ended before the signal"
        finally:
            code, took = _stop_flower(flower, sig)
        assert code == 0, f"flower exited with {code} after {sig.name}: {flower.output()}"
        print(f"{entry}: Flower ({workers} workers) stopped {took:.1f}s after {sig.name}, inspect calls in flight")


def test_the_interpreter_exits_without_waiting_for_a_call_in_flight() -> None:
    """ThreadPoolExecutor's threads are joined at exit: a process whose pool runs a 30 s call lives 30 s more."""
    script = textwrap.dedent("""
        import time
        from worker.runtime.flower import DaemonThreadPool
        pool = DaemonThreadPool()
        pool.submit(time.sleep, 30)
        pool.submit(time.sleep, 30)
        print("submitted", flush=True)
    """)
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and result.stdout == "submitted\n", result.stderr
    assert time.monotonic() - started < 10


def test_ctrl_c_stops_flower_whose_parent_left_sigint_ignored_and_blocked(system: System, tmp_path: Path) -> None:
    """Both survive exec, and Python then raises no KeyboardInterrupt: Flower restores Ctrl-C itself."""
    flower = _start_flower(system.config, tmp_path / "flower.log", sigint_ignored=True)
    code, _ = _stop_flower(flower)
    assert code == 0, f"flower exited with {code} after SIGINT: {flower.output()}"
