"""A real Redis broker emptied around a test (``broker``), the default client's producer sending to it
(``sender``), and what its live queue holds (``queued``): shared by the tests of the Producer
(tests/integration/store/broker/test_producer.py) and of enqueueing after a commit
(tests/integration/producer/test_sqlalchemy.py), whose conftest.py modules take these fixtures."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest
import redis

from store.broker.producer import Producer
from store.client import Client
from store.contract import LIVE_QUEUE
from store.process.defaults import use_client
from store.settings import Settings


@pytest.fixture
def broker(scratch_redis_url: str) -> Iterator[redis.Redis]:
    """The Redis at ``scratch_redis_url``, its database emptied before and after."""
    client = redis.Redis.from_url(scratch_redis_url)
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture
def sender(broker: redis.Redis, scratch_redis_url: str, postgres_url: str) -> Iterator[Producer]:
    """The producer of a default client whose broker is ``broker``, put back as it was afterwards."""
    settings = Settings.model_validate({"broker": {"url": scratch_redis_url}, "vectors": {"url": postgres_url}})
    client = Client(settings)
    previous = use_client(client)
    yield client.producer
    use_client(previous)
    client.close()


def queued(broker: redis.Redis) -> list[tuple[str, list[object]]]:
    """Each task in the live queue: its name and its arguments."""
    messages = [json.loads(raw) for raw in broker.lrange(LIVE_QUEUE, 0, -1)]
    return [(m["headers"]["task"], json.loads(base64.b64decode(m["body"]))[0]) for m in messages]
