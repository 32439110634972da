"""The clock of pushed documents (store.broker.versions) on a real Redis: shared by every producer, never going
back, and said plainly when it cannot be read."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from store.broker.producer import Producer
from store.broker.versions import CLOCK_KEY, DocumentClock
from store.errors import ConfigError, StoreUnavailable
from store.settings import Settings
from tests.services import free_port


@pytest.fixture
def shared(scratch_redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(scratch_redis_url)
    client.delete(CLOCK_KEY)
    yield client
    client.delete(CLOCK_KEY)
    client.close()


def test_two_producers_read_one_clock_that_only_goes_forward(
    scratch_redis_url: str, shared: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = DocumentClock(scratch_redis_url), DocumentClock(scratch_redis_url)
    real = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real() - 3600 * 10**9)  # this host's clock means nothing now
    versions = [clock.next() for _ in range(50) for clock in (first, second)]
    assert versions == sorted(set(versions))
    assert abs(versions[0] - real()) < 60 * 10**9  # the Redis server's clock, in nanoseconds as before
    future = versions[-1] // 1000 + 3600 * 10**6  # the server's clock stepped back an hour since the last version
    shared.set(CLOCK_KEY, future)
    assert first.next() == (future + 1) * 1000
    assert second.next() == (future + 2) * 1000
    first.close()
    second.close()


def test_a_clock_that_cannot_be_read_refuses_the_send() -> None:
    clock = DocumentClock(f"redis://:hunter2@127.0.0.1:{free_port()}/0")
    with pytest.raises(StoreUnavailable, match="clock of pushed documents") as raised:
        clock.next()
    assert "hunter2" not in str(raised.value)
    clock.close()


def test_without_a_redis_this_process_clock_still_never_repeats(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = DocumentClock("amqp://guest@127.0.0.1//")
    monkeypatch.setattr(time, "time_ns", lambda: 5)
    assert [clock.next() for _ in range(3)] == [5, 6, 7]


@pytest.mark.parametrize("version", [0, -1, 2**63, True, 1.5, "7"])
def test_a_version_the_app_gives_must_be_a_positive_integer(version: object) -> None:
    settings = Settings.model_validate(
        {"broker": {"url": "memory://"}, "collections": {"docs": {"source": {"kind": "push"}}}}
    )
    sent: list[object] = []
    producer = Producer(settings, send=lambda *args, **kwargs: sent.append(kwargs))
    with pytest.raises(ConfigError, match=f"version {version!r} of document 'a' is not allowed"):
        producer.index_document("docs", "a", "text", version=version)  # type: ignore[call-overload]
    assert sent == []
    producer.index_document("docs", "a", "text", version=42)
    assert sent[-1]["args"][4] == 42  # type: ignore[index]
    producer.close()
