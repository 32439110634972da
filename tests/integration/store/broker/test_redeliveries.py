"""Redeliveries counted per attempt of a message, in a real Redis, under keys that expire."""

from __future__ import annotations

import uuid

import redis

from store.broker.redeliveries import Redeliveries
from store.contract import REDELIVERED_KEY_PREFIX


def test_each_redelivery_of_an_attempt_is_counted_under_a_key_that_expires(redis_url: str) -> None:
    counter, message = Redeliveries(redis_url, ttl_seconds=120), str(uuid.uuid4())
    try:
        assert [counter.count(message, 0) for _ in range(3)] == [1, 2, 3]
        assert counter.count(message, 1) == 1  # a retry is a message of its own
        client = redis.Redis.from_url(redis_url)
        assert 0 < client.ttl(f"{REDELIVERED_KEY_PREFIX}{message}:0") <= 120
        client.delete(f"{REDELIVERED_KEY_PREFIX}{message}:0", f"{REDELIVERED_KEY_PREFIX}{message}:1")
        client.close()
    finally:
        counter.close()


def test_without_a_redis_nothing_is_counted_and_a_failing_one_counts_nothing() -> None:
    assert Redeliveries("amqp://guest@localhost//", ttl_seconds=60).count("m", 0) == 0
    gone = Redeliveries("redis://127.0.0.1:1/0", ttl_seconds=60)  # nothing listens on port 1
    assert gone.count("m", 0) == 0
    gone.close()
