"""The end-to-end tests' system: real Redis (or RabbitMQ), real PostgreSQL+pgvector, the fake OpenAI server, a CRM
table as the source; each test starts ``celery -A worker worker`` processes with its settings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery

from store.broker.config import celery_config
from store.settings import load_settings
from tests.backends import unique_name
from tests.crm import CrmTable
from tests.fake_openai import FakeOpenAI
from tests.integration.worker.end_to_end.world import World
from tests.settings_files import settings_toml


@pytest.fixture(params=["redis", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
def broker(request: pytest.FixtureRequest, broker_redis_url: str) -> str:
    if request.param == "rabbitmq":
        return str(request.getfixturevalue("amqp_url"))
    redis.Redis.from_url(broker_redis_url).flushdb()
    return broker_redis_url


@pytest.fixture
def world(
    tmp_path: Path, broker: str, scratch_redis_url: str, postgres_url: str, request: pytest.FixtureRequest
) -> Iterator[World]:
    cache = scratch_redis_url
    redis.Redis.from_url(cache).flushdb()
    collection = unique_name("notes")
    with FakeOpenAI(dimensions=8) as openai:
        crm = CrmTable(postgres_url, f"crm_{collection}")
        config = tmp_path / "vectorsync.toml"
        config.write_text(
            settings_toml(
                broker=broker,
                cache=cache,
                database=postgres_url,
                openai_url=openai.url,
                table=crm.name,
                collection=collection,
                metrics_port=getattr(request, "param", 0),
                extra=f'[collections.{collection}_pushed.source]\nkind = "push"\n',
            )
        )
        settings = load_settings(config)
        if broker.startswith("amqp"):
            app = Celery(set_as_current=False)
            app.conf.update(celery_config(settings))
            app.control.purge()
            app.close()
        yield World(config, settings, collection, crm, openai, postgres_url)
        crm.close()
