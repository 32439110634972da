"""store/transport/redis.py on every form of Redis broker URL (``store.connect.redis_urls``): TCP, TLS, a Unix
socket and a Sentinel's master are each consumed through the transport, as Celery is configured for producers and
workers (``celery_config``); a RabbitMQ broker keeps kombu's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from store.broker.config import REDIS_TRANSPORT
from store.transport.redis import Taking
from tests.integration.store.transport.channels import QUEUE, held


def _through_celery(url: str) -> tuple[type, list[Any]]:
    """Publish and consume one message on a Celery app configured as producers and workers are
    (``celery_config``) for a broker at ``url``: the channel's class, and what was consumed."""
    from celery import Celery

    from store.broker.config import celery_config
    from store.settings import Settings

    app = Celery("vs-forms", set_as_current=False)
    app.conf.update(celery_config(Settings.model_validate({"broker": {"url": url}})))
    got: list[Any] = []
    with app.connection_for_write() as connection:
        connection.Producer().publish(
            {"form": url.split(":", 1)[0]}, exchange=QUEUE.exchange, routing_key=QUEUE.routing_key, declare=[QUEUE]
        )
        with connection.Consumer(QUEUE, callbacks=[lambda body, m: (got.append(body), m.ack())], accept=["json"]):
            connection.drain_events(timeout=5)
        return type(connection.default_channel), got


def test_every_form_of_redis_broker_is_consumed_through_that_transport(server: str) -> None:
    """TCP, TLS (verifying the server's certificate) and a Unix socket: Celery, configured as our producers and
    workers are, takes through ``store.transport.redis``, never silently through kombu's own (a ``rediss://``
    or ``redis+socket://`` broker did before)."""
    channel, got = _through_celery(server)
    assert issubclass(channel, Taking), channel
    assert got == [{"form": server.split(":", 1)[0]}]
    assert held(server) == (0, 0)


def test_a_sentinel_broker_is_consumed_through_that_transport_and_follows_a_failover(tmp_path: Path) -> None:
    """A ``sentinel://`` broker: the master the Sentinel names takes through ``TAKE``, and after the Sentinel
    promotes the replica, a new connection finds the new master."""
    from tests.services import sentinel_group

    with sentinel_group(tmp_path) as group:
        first = group.master_port()
        channel, got = _through_celery(group.url)
        assert issubclass(channel, Taking) and "Sentinel" in channel.__name__, channel
        assert got == [{"form": "sentinel"}]
        assert group.failover() != first
        channel, got = _through_celery(group.url)
        assert got == [{"form": "sentinel"}]
        assert held(group.url) == (0, 0)


def test_a_rabbitmq_broker_keeps_kombus_transport() -> None:
    from store.broker.config import celery_config
    from store.settings import Settings

    settings = Settings.model_validate({"broker": {"url": "redis://127.0.0.1:6379/0"}})
    assert celery_config(settings)["broker_transport"] == REDIS_TRANSPORT
    amqp = Settings.model_validate({"broker": {"url": "amqp://guest:guest@127.0.0.1:5672//"}})
    assert "broker_transport" not in celery_config(amqp)
