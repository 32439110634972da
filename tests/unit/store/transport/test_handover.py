"""store/transport/handover.py: how a broker URL hands tasks over, said in one line, credentials left out."""

from __future__ import annotations

import pytest

from store.transport.handover import handover


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("redis://:s3cret@10.0.0.5:6379/0", "redis://10.0.0.5:6379/0: Redis over TCP"),
        ("rediss://:s3cret@cache.example.com:6380/0", "rediss://cache.example.com:6380/0: Redis over TLS"),
        ("unix:///run/redis.sock?db=1", "unix:///run/redis.sock?db=1: Redis over a Unix socket"),
        (
            "sentinel://10.0.0.1:26379;sentinel://10.0.0.2:26379/0?master_name=main",
            "sentinel://10.0.0.1:26379: Redis over the master Sentinel names 'main'",
        ),
    ],
)
def test_every_redis_form_is_said_to_take_atomically(url: str, said: str) -> None:
    found = handover(url)
    assert found.safe and found.summary.startswith(said) and found.summary.endswith("tasks taken atomically")
    assert found.line.startswith(f"broker {said}") and "s3cret" not in found.line + found.summary


def test_rabbitmq_keeps_the_task_until_the_ack() -> None:
    found = handover("amqp://guest:guest@rabbit:5672//")
    assert found.safe and "guest:" not in found.line and "RabbitMQ" in found.summary


def test_a_transport_vectorsync_does_not_test_is_said_to_lose_tasks() -> None:
    found = handover("sqs://key:secret@")
    assert not found.safe and "'sqs' transport" in found.line and "may be lost" in found.line
    assert "secret" not in found.line
