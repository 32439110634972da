"""`vectorsync reindex --plan` through its entry point, on real parts: a SQL source, a celery worker, pgvector, the
cache's Redis and the fake OpenAI server counting what it serves (tokens as OpenAI's ``usage``, cl100k). The
plan, made before each run, says the records, texts, calls and tokens the run then makes, exactly; it sends
nothing, writes nothing, and prices only what a declared price allows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from store.broker.config import celery_config
from store.settings import load_settings
from tests.backends import unique_name
from tests.crm import CrmTable, note, stored_chunks
from tests.fake_openai import FakeOpenAI
from tests.settings_files import settings_toml
from tests.workers import celery_worker, run_cli

pytestmark = pytest.mark.slow

RECORDS = 30
PRICE = 0.02


@dataclass
class Rig:
    config: Path
    collection: str
    openai: FakeOpenAI
    crm: CrmTable
    database: str
    cache: redis.Redis

    def plan(self) -> dict[str, Any]:
        result = run_cli(self.config, "reindex", self.collection, "--plan", "--json")
        assert result.returncode == 0, result.stdout + result.stderr
        return dict(json.loads(result.stdout))

    def reindex(self) -> tuple[int, int]:
        """Run a reindex to its end; the calls and tokens the server served for it."""
        calls, tokens = self.openai.served_calls, self.openai.served_tokens
        result = run_cli(self.config, "reindex", self.collection, "--wait", "--timeout", "120")
        assert result.returncode == 0, result.stdout + result.stderr
        return self.openai.served_calls - calls, self.openai.served_tokens - tokens


@pytest.fixture
def rig(tmp_path: Path, broker_redis_url: str, scratch_redis_url: str, postgres_url: str) -> Iterator[Rig]:
    redis.Redis.from_url(broker_redis_url).flushdb()
    redis.Redis.from_url(scratch_redis_url).flushdb()
    collection = unique_name("plan")
    with FakeOpenAI(dimensions=8) as openai:
        crm = CrmTable(postgres_url, f"crm_{collection}")
        config = tmp_path / "vectorsync.toml"
        toml = settings_toml(
            broker=broker_redis_url,
            cache=scratch_redis_url,
            database=postgres_url,
            openai_url=openai.url,
            table=crm.name,
            collection=collection,
            max_tokens=32,
            overlap=4,
            batch_size=10,
        )
        # OpenAI's model name at the fake server: its tokens are counted by cl100k on both sides.
        toml = toml.replace('"text-embedding-test"', f'"text-embedding-3-small"\nprice_per_million_tokens = {PRICE}')
        config.write_text(toml)
        app = Celery(set_as_current=False)
        app.conf.update(celery_config(load_settings(config)))
        app.control.purge()
        app.close()
        crm.insert([note(i) for i in range(1, RECORDS + 1)])
        yield Rig(config, collection, openai, crm, postgres_url, redis.Redis.from_url(scratch_redis_url))
        crm.close()


def test_each_plan_is_what_its_run_then_buys_and_sends_nothing_itself(rig: Rig) -> None:
    first = rig.plan()
    assert (rig.openai.served_calls, stored_chunks(rig.database, f"vs_{rig.collection}")) == (0, {})
    assert (first["new"], first["changed"], first["unchanged"], first["gone"]) == (RECORDS, 0, 0, 0)
    assert (first["counted_by"], first["pooled"], first["price_per_million_tokens"]) == ("tokenizer", True, PRICE)
    assert first["cost"] == pytest.approx(first["tokens"] * PRICE / 1e6)
    with celery_worker(rig.config):
        assert rig.reindex() == (first["calls"], first["tokens"])

        rig.crm.update(3, body="a new body for the third note, with words it never had before")
        rig.crm.update(4, kind="email")  # metadata alone: its vectors are stored
        rig.crm.delete([5])
        rig.cache.flushdb()  # only the store can spare a call now
        edited = rig.plan()
        assert (edited["new"], edited["changed"], edited["unchanged"], edited["gone"]) == (0, 2, RECORDS - 3, 1)
        assert edited["cached"] == 0 and edited["reused"] >= 1 and 0 < edited["embed"] < edited["chunks"]
        assert rig.reindex() == (edited["calls"], edited["tokens"])

        unchanged = rig.plan()
        assert (unchanged["unchanged"], unchanged["embed"], unchanged["calls"], unchanged["tokens"]) == (
            RECORDS - 1,
            0,
            0,
            0,
        )


def test_a_plan_of_a_collection_not_declared_says_so(rig: Rig) -> None:
    result = run_cli(rig.config, "reindex", "nope", "--plan")
    assert result.returncode == 2 and "nope" in result.stderr, result.stdout + result.stderr
