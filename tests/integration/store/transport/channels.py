"""A queue to publish to and take from through a broker's transport, and what Redis holds of it: shared by
the integration tests of ``store.transport`` (the servers themselves are conftest.py's)."""

from __future__ import annotations

from typing import Any

from kombu import Connection, Exchange, Queue

from store.connect.redis import redis_client
from store.connect.redis_urls import kombu_broker

QUEUE = Queue("vs-handover", Exchange("vs-handover", "direct"), "vs-handover")
#: Short enough for a test to see a recorded message come back (the worker's own are in ``celery_config``).
RESTORING = {
    "socket_timeout": 2,
    "visibility_timeout": 2,
    "unacked_restore_interval": 1,
    "unacked_mutex_expire": 1,
    "unacked_restore_throttle": 1,
}


def connect(url: str, transport: Any = None, **options: Any) -> Connection:
    """A kombu connection to ``url`` as the broker's configuration makes it (``kombu_broker``), through
    ``transport`` (default: the one of ``url``'s form)."""
    broker = kombu_broker(url)
    return Connection(broker.url, transport=transport or broker.transport, ssl=broker.use_ssl or False, **options)


def publish(url: str, body: dict[str, Any]) -> None:
    with connect(url) as opened:
        opened.Producer().publish(
            body, exchange=QUEUE.exchange, routing_key=QUEUE.routing_key, declare=[QUEUE], serializer="json"
        )


def held(url: str) -> tuple[int, int]:
    """Messages in the queue, and recorded as unacknowledged."""
    client = redis_client(url, timeout=5)
    try:
        return int(client.llen(QUEUE.name)), int(client.hlen("unacked"))
    finally:
        client.close()
