"""A real Redis broker emptied around a test, the default client sending to it, and what its live queue holds:
shared by the tests of the Producer (tests/integration/store/broker/) and of enqueueing after a commit."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from store.broker.producer import Producer
from store.client import Client
from store.contract import LIVE_QUEUE
from store.process.defaults import use_client
from store.settings import Settings


@contextmanager
def emptied(url: str) -> Iterator[redis.Redis]:
    """The Redis at ``url``, its database emptied before and after."""
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield client
    client.flushdb()


@contextmanager
def default_producer_of(url: str, postgres_url: str) -> Iterator[Producer]:
    """The producer of a default client whose broker is ``url``, put back as it was afterwards."""
    settings = Settings.model_validate({"broker": {"url": url}, "vectors": {"url": postgres_url}})
    client = Client(settings)
    previous = use_client(client)
    yield client.producer
    use_client(previous)
    client.close()


def queued(broker: redis.Redis) -> list[tuple[str, list[object]]]:
    """Each task in the live queue: its name and its arguments."""
    messages = [json.loads(raw) for raw in broker.lrange(LIVE_QUEUE, 0, -1)]
    return [(m["headers"]["task"], json.loads(base64.b64decode(m["body"]))[0]) for m in messages]
