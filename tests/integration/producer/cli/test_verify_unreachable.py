"""`vectorsync verify` when a part it needs cannot be reached, on real PostgreSQL (the ledger, pgvector, the SQL
source) and a broker or source URL pointing at a closed port: a repair whose send fails loses no record (its
ledger entry is kept, so the next verify still reports it), nothing is sent while the source cannot be read, and
either way the command says which part is unreachable, that nothing was lost, and exits 3 (run it again)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from store.client import Client
from store.settings import load_settings
from tests.backends import unique_name
from tests.crm import CrmTable, note
from tests.fake_openai import FakeOpenAI
from tests.settings_files import settings_toml
from tests.workers import run_cli
from worker.pipeline.indexer import Indexer
from worker.runtime.context import WorkerContext

RECORDS = 6


@dataclass
class Rig:
    """A collection indexed in this process; ``config`` reaches every part, ``closed`` is a port nothing
    listens on, and ``settings_with`` writes a settings file with one part moved there."""

    folder: Path
    collection: str
    database: str
    parts: dict[str, str]
    closed: str

    def settings_with(self, **parts: str) -> Path:
        config = self.folder / f"vectorsync-{'-'.join(parts) or 'reachable'}.toml"
        config.write_text(settings_toml(**(self.parts | parts)))
        return config

    def verify(self, config: Path, *options: str) -> tuple[int, dict[str, Any] | None, str]:
        result = run_cli(config, "verify", self.collection, "--json", *options)
        return result.returncode, json.loads(result.stdout) if result.stdout.strip() else None, result.stderr

    def sql(self, statement: str) -> None:
        with psycopg.connect(self.database, autocommit=True) as conn:
            conn.execute(statement)  # test-owned names

    def ledger_ids(self) -> set[str]:
        with Client(load_settings(self.settings_with())) as client:
            found = client.ledger.entries(self.collection, [str(i) for i in range(1, RECORDS + 1)])
            return set(found)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port bound and never listened on: a connection to it is refused, and no other process takes it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


@pytest.fixture
def rig(
    tmp_path: Path, broker_redis_url: str, scratch_redis_url: str, postgres_url: str, closed_port: int
) -> Iterator[Rig]:
    for url in (broker_redis_url, scratch_redis_url):
        redis.Redis.from_url(url).flushdb()
    collection = unique_name("unreach")
    with FakeOpenAI(dimensions=8) as openai:
        crm = CrmTable(postgres_url, f"crm_{collection}")
        crm.insert([note(i) for i in range(1, RECORDS + 1)])
        parts = {
            "broker": broker_redis_url,  # no worker: what is sent stays there, to be counted
            "cache": scratch_redis_url,
            "database": postgres_url,
            "openai_url": openai.url,
            "table": crm.name,
            "collection": collection,
            "max_tokens": 32,
            "overlap": 4,
        }
        rig = Rig(tmp_path, collection, postgres_url, parts, f"127.0.0.1:{closed_port}")
        context = WorkerContext.from_settings(load_settings(rig.settings_with()))
        try:
            assert (
                len(Indexer(context.pipeline(collection)).index([str(i) for i in range(1, RECORDS + 1)]).indexed)
                == RECORDS
            )
        finally:
            context.close()
        yield rig
        crm.close()


def queued(broker: str) -> int:
    """The messages the broker's Redis holds, in every queue (a queue's bell, ``store.transport.redis``, carries
    none)."""
    client = redis.Redis.from_url(broker)
    lists = [key for key in client.scan_iter() if client.type(key) == b"list" and not key.startswith(b"_vectorsync.")]
    return sum(client.llen(key) for key in lists)


def test_a_repair_whose_send_fails_keeps_the_drifted_records_entry_and_says_to_run_it_again(rig: Rig) -> None:
    rig.sql(f"DELETE FROM vs_{rig.collection} WHERE record_id = '1'")
    code, _, stderr = rig.verify(rig.settings_with(broker=f"redis://{rig.closed}/0"), "--repair")
    assert rig.ledger_ids() == {str(i) for i in range(1, RECORDS + 1)}  # record 1's entry kept
    again, report, _ = rig.verify(rig.settings_with())
    assert again == 1 and report is not None and [d["record_id"] for d in report["first"]] == ["1"]
    assert code == 3, stderr
    assert "the broker did not take a repair's index_batch task (OperationalError: " in stderr, stderr
    assert "1 drifted records of " in stderr and "their ledger entries are back as they were" in stderr, stderr
    assert f"nothing was lost: run `vectorsync verify {rig.collection} --repair` again" in stderr, stderr


def test_an_unreachable_source_sends_nothing_and_exits_3(rig: Rig) -> None:
    rig.sql(  # an orphan chunk: a record neither the ledger nor the source has
        f"INSERT INTO vs_{rig.collection} (id, record_id, chunk, embedding, text, metadata, model, keywords, "
        "keyword_length, text_hash) SELECT '999:0', '999', 0, embedding, text, "
        "jsonb_set(metadata, '{record_id}', '\"999\"'), model, keywords, keyword_length, text_hash "
        f"FROM vs_{rig.collection} WHERE id = '2:0'"
    )
    source = f"postgresql://vectorsync@{rig.closed}/nosuch"
    code, _, stderr = rig.verify(rig.settings_with(source_url=source), "--repair")
    assert queued(rig.parts["broker"]) == 0  # the orphan was not sent
    assert code == 3, stderr
    assert stderr.startswith(f"error: source database postgresql+psycopg://vectorsync@{rig.closed}/nosuch failed")
    assert f"nothing was sent or changed: run `vectorsync verify {rig.collection} --repair` again" in stderr
    compared, _, stderr = rig.verify(rig.settings_with(source_url=source))  # without --repair: nothing to send
    assert compared == 3 and "Connection refused" in stderr, stderr
