"""`vectorsync reindex --plan` of a capped run, on real parts (a SQL source, a celery worker, pgvector, the cache's
Redis, the fake OpenAI server counting what it serves): a capped run pools no leftovers, so each batch packs its
own provider calls, and its plan must say so. Issue 48, defect 8: ``reindex --plan --max-tokens N`` predicted the
pooled run's calls (3) where the capped run made 40. A cap of the collection's ``[budget]`` caps every run
that names none, so the plain ``--plan`` follows it too."""

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
from tests.crm import CrmTable, note
from tests.fake_openai import FakeOpenAI, cl100k_tokens
from tests.settings_files import settings_toml
from tests.workers import celery_worker, run_cli

pytestmark = pytest.mark.slow

RECORDS = 40
#: A cap no run of these records reaches: the run is capped, and never pauses.
CAP = 10_000_000


@dataclass
class Rig:
    config: Path
    collection: str
    openai: FakeOpenAI

    def plan(self, *caps: str) -> dict[str, Any]:
        result = run_cli(self.config, "reindex", self.collection, "--plan", "--json", *caps)
        assert result.returncode == 0, result.stdout + result.stderr
        return dict(json.loads(result.stdout))

    def reindex(self, *caps: str) -> tuple[int, int]:
        """Run a reindex to its end; the calls and tokens the server served for it."""
        calls, tokens = self.openai.served_calls, self.openai.served_tokens
        result = run_cli(self.config, "reindex", self.collection, "--wait", "--timeout", "120", *caps)
        assert result.returncode == 0, result.stdout + result.stderr
        return self.openai.served_calls - calls, self.openai.served_tokens - tokens


def _rig(tmp_path: Path, urls: tuple[str, str, str], openai: FakeOpenAI, crm: CrmTable, budget: str) -> Rig:
    broker, cache, database = urls
    collection = crm.name.removeprefix("crm_")
    toml = settings_toml(
        broker=broker,
        cache=cache,
        database=database,
        openai_url=openai.url,
        table=crm.name,
        collection=collection,
        max_tokens=32,
        overlap=4,
        batch_size=8,
        model="text-embedding-3-small",
        extra=f"[collections.{collection}.budget]\n{budget}\n" if budget else "",
    )
    # Calls of 16 texts, counted by cl100k on both sides (an OpenAI model's name); a call a loaded machine answers
    # late is not sent again (the server would count it twice).
    toml = toml.replace("\nbatch_size = 64\n", "\nbatch_size = 16\n").replace("\ntimeout = 5\n", "\ntimeout = 30\n")
    config = tmp_path / "vectorsync.toml"
    config.write_text(toml)
    app = Celery(set_as_current=False)
    app.conf.update(celery_config(load_settings(config)))
    app.control.purge()
    app.close()
    return Rig(config, collection, openai)


@pytest.fixture
def parts(broker_redis_url: str, scratch_redis_url: str, postgres_url: str) -> Iterator[tuple[FakeOpenAI, CrmTable]]:
    redis.Redis.from_url(broker_redis_url).flushdb()
    redis.Redis.from_url(scratch_redis_url).flushdb()
    cl100k_tokens("warm")  # the server counts with cl100k: loaded now, its first answer is not late for a worker
    with FakeOpenAI(dimensions=8) as openai:
        crm = CrmTable(postgres_url, f"crm_{unique_name('plancap')}")
        crm.insert([note(i) for i in range(1, RECORDS + 1)])
        try:
            yield openai, crm
        finally:
            crm.close()


def test_a_capped_reindex_is_planned_unpooled_as_the_capped_run_then_packs_it(
    tmp_path: Path,
    parts: tuple[FakeOpenAI, CrmTable],
    broker_redis_url: str,
    scratch_redis_url: str,
    postgres_url: str,
) -> None:
    rig = _rig(tmp_path, (broker_redis_url, scratch_redis_url, postgres_url), *parts, budget="")
    pooled, capped = rig.plan(), rig.plan("--max-tokens", str(CAP))
    with celery_worker(rig.config):
        assert rig.reindex("--max-tokens", str(CAP)) == (capped["calls"], capped["tokens"])
    assert capped["tokens"] == pooled["tokens"] and capped["calls"] > pooled["calls"]  # the same texts, more calls
    assert (pooled["pooled"], capped["pooled"], capped.get("max_tokens")) == (True, False, CAP)


def test_a_collection_budget_caps_the_plain_plan_as_it_caps_the_run(
    tmp_path: Path,
    parts: tuple[FakeOpenAI, CrmTable],
    broker_redis_url: str,
    scratch_redis_url: str,
    postgres_url: str,
) -> None:
    urls = (broker_redis_url, scratch_redis_url, postgres_url)
    rig = _rig(tmp_path, urls, *parts, budget=f"max_tokens = {CAP}")
    plan = rig.plan()
    with celery_worker(rig.config):
        assert rig.reindex() == (plan["calls"], plan["tokens"])
    assert (plan["pooled"], plan.get("max_tokens")) == (False, CAP)
