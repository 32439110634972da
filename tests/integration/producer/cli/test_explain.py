"""`vectorsync explain` through its entry point, on a real pgvector collection over a SQL source: a celery
worker indexes the records, then each state is made as it happens in life (a row changed with and without its
task queued, chunks deleted behind the ledger's back, a row deleted, a provider refusing a record) and the
verdict read back; Redis holds the broker and the queued marks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from celery import Celery

from store.broker.config import celery_config
from store.client import Client
from store.settings import load_settings
from tests.backends import unique_name
from tests.crm import CrmTable, note
from tests.fake_openai import FakeOpenAI
from tests.settings_files import settings_toml
from tests.workers import celery_worker, run_cli, wait_for
from worker.repair.source_reading import SourceReading

pytestmark = pytest.mark.slow


@dataclass
class Rig:
    config: Path
    collection: str
    crm: CrmTable
    openai: FakeOpenAI
    client: Client
    database: str
    #: The record's source as a worker reads it, for the in-process polls.
    reading: SourceReading

    def explain(self, record_id: str) -> dict[str, Any]:
        result = run_cli(self.config, "explain", self.collection, record_id, "--json")
        assert result.returncode == 0, result.stderr
        return dict(json.loads(result.stdout))

    def state(self, record_id: str) -> str:
        """The verdict's state as this process reads it: a poll that starts no CLI process each time."""
        return str(self.client.explain(self.collection, record_id, source=self.reading).verdict.state)

    def indexed(self, *ids: str) -> bool:
        return len(self.client.ledger.entries(self.collection, list(ids))) == len(ids)


@pytest.fixture
def rig(tmp_path: Path, broker_redis_url: str, scratch_redis_url: str, postgres_url: str) -> Iterator[Rig]:
    redis.Redis.from_url(broker_redis_url).flushdb()
    collection = unique_name("explain")
    with FakeOpenAI(dimensions=8) as openai:
        crm = CrmTable(postgres_url, f"crm_{collection}")
        config = tmp_path / "vectorsync.toml"
        config.write_text(
            settings_toml(
                broker=broker_redis_url,
                cache=scratch_redis_url,
                database=postgres_url,
                openai_url=openai.url,
                table=crm.name,
                collection=collection,
            )
        )
        settings = load_settings(config)
        app = Celery(set_as_current=False)
        app.conf.update(celery_config(settings))
        app.control.purge()
        app.close()
        with Client(settings) as client:
            reading = SourceReading(client)
            try:
                yield Rig(config, collection, crm, openai, client, postgres_url, reading)
            finally:
                reading.close()
        crm.close()


def test_each_verdict_as_the_command_prints_it(rig: Rig) -> None:
    rig.crm.insert([note(i) for i in (1, 2, 3)])
    with celery_worker(rig.config):
        assert run_cli(rig.config, "index", rig.collection, "1", "2", "3").returncode == 0
        wait_for(lambda: rig.indexed("1", "2", "3"), timeout=60, what="records 1-3 indexed")

        current = rig.explain("1")
        assert current["verdict"] == {"state": "current", "line": "searchable and current"}
        assert current["source"]["hash"] == current["entry"]["content_hash"]
        assert len(current["chunks"]) == current["entry"]["chunks"] > 0
        assert [(c["model"], bool(c["written_at"]), c["tokens"] > 0) for c in current["chunks"]] == [
            (current["entry"]["model"], True, True)
        ] * len(current["chunks"])

        rig.openai.always(status=400, message="input is too long for this model")
        rig.crm.insert([note(4)])
        assert run_cli(rig.config, "index", rig.collection, "4").returncode == 0
        wait_for(lambda: rig.client.ledger.failures(rig.collection), timeout=60, what="record 4 to fail")
        rig.openai.always(status=200)
    failed = rig.explain("4")
    assert failed["verdict"]["state"] == "failed"
    assert "input is too long for this model" in failed["verdict"]["line"]
    assert failed["verdict"]["line"].endswith("retry with `vectorsync failures --retry`")

    # No worker from here on: what is sent stays queued, with its queued mark set.
    rig.crm.update(1, body="a new body about churn")
    stale = rig.explain("1")
    assert stale["verdict"]["state"] == "stale" and stale["queued"] is False
    assert stale["verdict"]["line"].endswith(f"and nothing is queued: run `vectorsync index {rig.collection} 1`")
    assert run_cli(rig.config, "index", rig.collection, "1").returncode == 0
    queued = rig.explain("1")
    assert queued["queued"] is True
    assert queued["verdict"]["line"] == f"stale: the source changed at {queued['source']['stamp']}, a change is queued"

    with psycopg.connect(rig.database, autocommit=True) as conn:  # the store loses record 2's chunks
        conn.execute(f"DELETE FROM vs_{rig.collection} WHERE record_id = '2'")
    missing = rig.explain("2")
    assert (missing["verdict"]["state"], missing["chunks"]) == ("missing", [])
    assert missing["verdict"]["line"].endswith(
        f"run `vectorsync verify {rig.collection} --repair` (`vectorsync index` alone skips it as unchanged)"
    )

    rig.crm.delete([3])
    gone = rig.explain("3")
    assert gone["verdict"]["state"] == "gone" and gone["source"]["found"] is False
    assert gone["verdict"]["line"].endswith(f"run `vectorsync index {rig.collection} 3` to delete them")

    with celery_worker(rig.config):  # the queued change, then the fixes the verdicts named
        wait_for(lambda: rig.state("1") == "current", timeout=60, what="record 1 current")
        assert rig.explain("1")["verdict"]["state"] == "current"
        assert run_cli(rig.config, "index", rig.collection, "3").returncode == 0
        wait_for(
            lambda: not rig.client.explain(rig.collection, "3").chunks, timeout=60, what="record 3's chunks deleted"
        )
        assert rig.explain("3")["verdict"]["line"] == "gone from the source: nothing of it is stored, as it should be"
        repaired = run_cli(rig.config, "verify", rig.collection, "--repair")
        assert repaired.returncode == 1 and "sent to be indexed again" in repaired.stdout, (
            repaired.stdout + repaired.stderr
        )
        wait_for(lambda: rig.state("2") == "current", timeout=60, what="record 2 repaired")
        assert rig.explain("2")["verdict"]["state"] == "current"


def test_the_text_form_ends_with_the_verdict_and_bad_input_exits_2(rig: Rig) -> None:
    rig.crm.insert([note(1)])
    shown = run_cli(rig.config, "explain", rig.collection, "1")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"{rig.collection} 1 (in the pgvector table vs_{rig.collection})"
    assert (
        lines[-1] == "verdict: not indexed yet and nothing is queued: run " + f"`vectorsync index {rig.collection} 1`"
    )

    unknown = run_cli(rig.config, "explain", "nope", "1")
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == (
        f"error: collection 'nope' is not configured (configured: {rig.collection}): check the name, or add "
        "[collections.nope] to the settings"
    )
    assert unknown.stdout == ""


def test_a_change_waiting_in_the_capture_outbox_is_a_change_queued(
    tmp_path: Path, broker_redis_url: str, scratch_redis_url: str, postgres_url: str
) -> None:
    from store.capture.control import disable, enable

    collection = unique_name("captured")
    crm = CrmTable(postgres_url, f"crm_{collection}")
    config = tmp_path / "vectorsync.toml"
    config.write_text(
        settings_toml(
            broker=broker_redis_url,
            cache=scratch_redis_url,
            database=postgres_url,
            openai_url="http://127.0.0.1:9",  # nothing is embedded here
            table=crm.name,
            collection=collection,
            capture=True,
        )
    )
    settings = load_settings(config)
    enable(settings, collection)
    try:
        crm.insert([note(1)])  # the trigger writes the outbox row; no relay runs here
        result = run_cli(config, "explain", collection, "1", "--json")
        assert result.returncode == 0, result.stderr
        facts = json.loads(result.stdout)
        assert (facts["outbox_rows"], facts["queued"]) == (1, False)
        assert facts["verdict"] == {"state": "not indexed", "line": "not indexed yet: a change is queued"}
    finally:
        disable(settings, collection)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("DELETE FROM vectorsync_outbox WHERE collection = %s", (collection,))
        crm.close()
