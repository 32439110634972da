"""The system a change-capture test drives: settings with capture on, the source table written by a plain SQL client,
the fake provider, and what the catalog, the outbox, the store and the worker's metrics say."""

from __future__ import annotations

import re
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from store.settings import Settings, load_settings
from store.state.ledger.postgres import PostgresLedger
from tests.backends import unique_name
from tests.crm import CrmTable, Psql, expected_chunks, outbox_rows, stored_chunks
from tests.fake_openai import FakeOpenAI
from tests.services import free_port
from tests.settings_files import settings_toml
from tests.workers import run_cli, wait_for

__all__ = ["MakeWorld", "World", "capture_catalog", "init_capture", "make_world"]


def capture_catalog(sql: Psql, table: str, collection: str) -> tuple[list[str], list[str]]:
    """The triggers on ``table`` and the functions named for ``collection``'s capture, as the catalog has them."""
    triggers = [
        r[0]
        for r in sql.run(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass(%s) AND NOT tgisinternal ORDER BY tgname",
            (f'"{table}"',),
        )
    ]
    functions = [r[0] for r in sql.run("SELECT proname FROM pg_proc WHERE proname = %s", (f"vs_capture_{collection}",))]
    return triggers, functions


@dataclass
class World:
    """One test's system: settings, the source table (created here, written by ``sql``), the fake provider."""

    config: Path
    settings: Settings
    collection: str
    crm: CrmTable
    sql: Psql
    openai: FakeOpenAI
    database: str

    @property
    def table(self) -> str:
        return self.settings.vectors.table_prefix + self.collection

    @property
    def source(self) -> str:
        return self.crm.name

    def expected(self) -> dict[str, tuple[str, dict[str, object]]]:
        return expected_chunks(self.settings, self.collection, self.crm.rows())

    def stored(self) -> dict[str, tuple[str, dict[str, object]]]:
        return stored_chunks(self.database, self.table)

    def pending(self) -> int:
        return outbox_rows(self.sql, self.collection)

    def caught_up(self) -> bool:
        """The outbox of this collection is empty and the store equals the source."""
        return self.pending() == 0 and self.stored() == self.expected()

    def wait_caught_up(self, what: str, timeout: float = 60) -> float:
        """Wait until ``caught_up``; how many seconds it took."""
        start = time.monotonic()
        wait_for(self.caught_up, timeout=timeout, every=0.1, what=what)
        return time.monotonic() - start

    def received(self, task: str, worker: str = "w1") -> int:
        """How many ``task`` messages the worker ``worker`` has received so far (its log says each)."""
        log = self.config.parent / f"{worker}.log"
        return len(re.findall(rf"Task {re.escape(task)}\[[0-9a-f-]+\] received", log.read_text(errors="replace")))

    def runs(self) -> list[Any]:
        ledger = PostgresLedger(self.database)
        try:
            return [r for r in ledger.recent_runs(1000) if r.collection == self.collection]
        finally:
            ledger.close()

    def metrics(self) -> str:
        port = self.settings.worker.metrics_port
        return str(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode())


#: ``make_world``'s: a World with capture on.
MakeWorld = Callable[..., World]


@pytest.fixture
def make_world(tmp_path: Path, broker_redis_url: str, scratch_redis_url: str, postgres_url: str) -> Iterator[MakeWorld]:
    """Builds a World with capture on: ``capture`` is the body of the [capture] section, ``source_url`` the
    URL the source is read (and the outbox relayed) through. Torn down at the end of the test."""
    redis.Redis.from_url(broker_redis_url).flushdb()
    redis.Redis.from_url(scratch_redis_url).flushdb()
    with ExitStack() as stack:

        def make(*, capture: str = "", source_url: str | None = None, columns: str = "") -> World:
            collection = unique_name("cap")
            openai = stack.enter_context(FakeOpenAI(dimensions=8))
            crm = CrmTable(postgres_url, f"crm_{collection}")
            stack.callback(crm.close)
            sql = Psql(postgres_url)
            stack.callback(sql.close)
            if columns:
                sql.run(f'ALTER TABLE "{crm.name}" {columns}')
            config = tmp_path / "vectorsync.toml"
            config.write_text(
                settings_toml(
                    broker=broker_redis_url,
                    cache=scratch_redis_url,
                    database=postgres_url,
                    openai_url=openai.url,
                    table=crm.name,
                    collection=collection,
                    metrics_port=free_port(),
                    capture=True,
                    source_url=source_url,
                    extra=f"[capture]\npoll_seconds = 1\n{capture}\n",
                )
            )
            return World(config, load_settings(config), collection, crm, sql, openai, postgres_url)

        yield make


def init_capture(world: World) -> subprocess.CompletedProcess[str]:
    """``vectorsync init``: the collection created and its capture installed, as a deploy does."""
    result = run_cli(world.config, "init")
    assert result.returncode == 0, result.stdout + result.stderr
    return result
