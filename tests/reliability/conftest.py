"""The reliability rig: a system of real parts that faults are injected into, and the check every scenario
ends with: the store equals the source (ids, chunk texts, metadata), nothing duplicated or orphaned, the
failures table accounts for every record not indexed, and every run has ended.

Each scenario records its figures (records, faults injected, lost, duplicated, runs left running, and with
change capture the rows left in the outbox); the session prints them as one table at the end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
import sqlalchemy as sa

from producer.client import Producer
from store.settings import Settings, load_settings
from store.state.ledger.postgres import PostgresLedger
from tests.backends import unique_name
from tests.fake_openai import FakeOpenAI
from tests.services import free_port, redis_answers, redis_server_binary
from tests.workers import (
    OUTBOX,
    CrmTable,
    celery_worker,
    expected_chunks,
    sql_collection,
    stored_chunks,
    wait_for,
)

FIGURES: list[dict[str, Any]] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/reliability" in str(item.fspath):
            item.add_marker(pytest.mark.reliability)
            item.add_marker(pytest.mark.slow)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES:
        return
    terminalreporter.section("reliability figures")
    terminalreporter.write_line(f"{'scenario':<52} {'records':>7} {'faults':>6} {'lost':>4} {'dup':>4} {'running':>7} "
                                f"{'outbox':>6}")
    for row in FIGURES:
        outbox = "-" if row.get("outbox") is None else row["outbox"]
        terminalreporter.write_line(f"{row['scenario']:<52} {row['records']:>7} {row['faults']:>6} {row['lost']:>4} "
                                    f"{row['duplicated']:>4} {row['running']:>7} {outbox:>6}")


class Redis:
    """A redis-server of the rig's own, that a scenario can kill and start again (with or without AOF)."""

    def __init__(self, folder: Path, *, persistent: bool) -> None:
        self.folder, self.persistent, self.port = folder, persistent, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        aof = ["--appendonly", "yes", "--appendfsync", "always"] if self.persistent else ["--appendonly", "no"]
        self.process = subprocess.Popen(
            [redis_server_binary()[0], "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--dir", str(self.folder), *aof], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: redis_answers(self.url), timeout=10, what="redis-server to start")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)

    def restart(self, *, down_seconds: float = 1.0) -> None:
        self.kill()
        time.sleep(down_seconds)
        self.start()


@dataclass
class Rig:
    """One scenario's system: settings, source table, two model endpoints, its broker, its workers."""

    config: Path
    settings: Settings
    collection: str
    crm: CrmTable
    primary: FakeOpenAI
    backup: FakeOpenAI
    database: str
    broker: Redis
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def table(self) -> str:
        return self.settings.vectors.table_prefix + self.collection

    def producer(self) -> Producer:
        return Producer(self.settings)

    @contextmanager
    def worker(self, name: str = "w1", *, concurrency: int = 2) -> Iterator[subprocess.Popen[bytes]]:
        with celery_worker(self.config, concurrency=concurrency, name=name) as process:
            yield process

    def ledger(self) -> PostgresLedger:
        return PostgresLedger(self.database)

    def runs(self) -> list[Any]:
        ledger = self.ledger()
        try:
            return [r for r in ledger.recent_runs(10_000) if r.collection == self.collection]
        finally:
            ledger.close()

    @property
    def captured(self) -> bool:
        return self.settings.collections[self.collection].source.capture == "trigger"

    def outbox(self) -> int | None:
        """This collection's rows waiting in the outbox; None without change capture."""
        if not self.captured:
            return None
        with self.crm.engine.connect() as conn:
            if conn.execute(sa.text(f"SELECT to_regclass('{OUTBOX}')")).scalar() is None:
                return 0
            return int(conn.execute(sa.text(f"SELECT count(*) FROM {OUTBOX} WHERE collection = :c"),
                                    {"c": self.collection}).scalar_one())

    def settled(self) -> bool:
        """Every run has ended, the outbox is empty (with capture) and the store equals the source, but for
        recorded failures."""
        return (all(r.status.ended for r in self.runs()) and not self.outbox()
                and self.figures()["lost"] == 0)

    def figures(self) -> dict[str, int | None]:
        rows = self.crm.rows()
        expected = expected_chunks(self.settings, self.collection, rows)
        stored = stored_chunks(self.database, self.table)
        ledger = self.ledger()
        try:
            failed = {f.record_id for f in ledger.failures(self.collection)}
        finally:
            ledger.close()

        def record(chunk_id: str) -> str:
            return chunk_id.rsplit(":", 1)[0]

        wrong = {record(k) for k, v in expected.items() if record(k) not in failed and stored.get(k) != v}
        extra = {record(k) for k in stored if k not in expected}  # duplicates, orphans, stale chunks
        unaccounted = {record(k) for k in expected} - {record(k) for k in stored} - failed
        return {"records": len(rows), "lost": len(wrong | unaccounted), "duplicated": len(extra),
                "running": sum(not r.status.ended for r in self.runs()), "failed": len(failed),
                "outbox": self.outbox()}

    def verify(self, scenario: str, *, faults: int, timeout: float = 180, failures: int = 0
               ) -> dict[str, int | None]:
        """Wait for the system to settle, then check it and record the figures."""
        try:
            wait_for(self.settled, timeout=timeout, every=1.0, what=f"{scenario} to settle")
        except AssertionError as exc:
            states = [(r.run_id[:8], str(r.status), r.processed, r.total, r.error[:100]) for r in self.runs()]
            raise AssertionError(f"{exc}; runs: {states}; figures: {self.figures()}") from None
        finally:
            found = self.figures()
            FIGURES.append({"scenario": scenario, "faults": faults, **found})
        assert (found["lost"], found["duplicated"], found["running"], found["outbox"] or 0) == (0, 0, 0, 0), found
        assert found["failed"] == failures, found
        return found


def settings_text(*, broker: str, database: str, table: str, collection: str, primary: str, backup: str,
                  capture: bool = False) -> str:
    """The rig's settings; with ``capture``, triggers write the collection's changes to the outbox and the workers
    relay them (a claim of 100 rows at a time, so a flood takes many).

    Capture's scenarios send a flood to workers that have just started: a pool process's first batch pays for
    building its clients (openai's import alone is a second; 15 s seen under xdist on a loaded 2-core machine),
    which the 6 s limit of the others' would kill, and a batch killed at its hard limit is acknowledged, not
    delivered again. They get 25 s (and a visibility timeout above it)."""
    relaying = "[capture]\npoll_seconds = 1\nclaim_rows = 100\n" if capture else ""
    visibility, limit = (30, 25) if capture else (8, 6)
    return f"""
[broker]
url = "{broker}"
visibility_timeout = {visibility}

[worker]
time_limit = {limit}
index_time_limit = {limit + 1}
batch_size = 50
max_retries = 7
retry_delay = 1
stall_seconds = 3

[cache]
url = "{broker.rsplit('/', 1)[0]}/1"

[models.primary]
provider = "openai"
model = "text-embedding-test"
dimensions = 8
base_url = "{primary}"
timeout = 1

[models.backup]
provider = "openai"
model = "text-embedding-test"
dimensions = 8
base_url = "{backup}"
timeout = 1

[embeddings]
chain = ["primary", "backup"]
batch_size = 64
max_attempts = 2
max_wait_seconds = 0.5
cooldown_seconds = 3

[vectors]
store = "pgvector"
url = "{database}"
dimensions = 8

{relaying}
{sql_collection(database=database, table=table, collection=collection, capture=capture)}"""


@contextmanager
def make_rig(folder: Path, database: str, *, persistent: bool = False, capture: bool = False) -> Iterator[Rig]:
    """A rig in ``folder``: its own broker (with AOF when ``persistent``), model servers and source table (its
    changes captured by triggers when ``capture``: ``vectorsync init`` installs them)."""
    broker = Redis(folder / "redis", persistent=persistent)
    broker.start()
    collection = unique_name("rel")
    with FakeOpenAI(dimensions=8) as primary, FakeOpenAI(dimensions=8) as backup:
        crm = CrmTable(database, f"crm_{collection}")
        config = folder / "vectorsync.toml"
        config.write_text(settings_text(broker=broker.url, database=database, table=crm.name,
                                        collection=collection, primary=primary.url, backup=backup.url,
                                        capture=capture))
        try:
            yield Rig(config, load_settings(config), collection, crm, primary, backup, database, broker)
        finally:
            crm.close()
            broker.kill()


@pytest.fixture
def rig(tmp_path: Path, postgres_url: str, request: pytest.FixtureRequest) -> Iterator[Rig]:
    with make_rig(tmp_path, postgres_url, persistent=bool(getattr(request, "param", False))) as made:
        yield made


def kill_tree(process: subprocess.Popen[bytes] | psutil.Process, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to a worker's main process and its pool, as a crash or an OOM kill would."""
    root = psutil.Process(process.pid)
    for member in [*root.children(recursive=True), root]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(member.pid, sig)
