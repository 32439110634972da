"""The worker's heartbeat against a broker gone silent: each beat gives up after one reconnect (Celery's
retried forever, holding the worker's main process), says so once, and says so again when the broker is back.
The broker is a real Redis behind a proxy of the test's own that can swallow everything it is sent."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from celery import Celery
from celery.worker.consumer import Consumer as CeleryConsumer
from kombu.asynchronous.timer import Timer

from tests.proxy import Proxy as BaseProxy
from worker.runtime.app import app
from worker.runtime.heartbeat import BoundedHeart, Consumer


class Proxy(BaseProxy):
    """TCP to ``target``; while ``silent``, whatever comes in is read and dropped, and nothing goes out."""

    silent = False

    def forward(self, source: socket.socket, sink: socket.socket, data: bytes) -> None:
        if not self.silent:
            sink.sendall(data)


@pytest.fixture
def proxy(redis_url: str) -> Iterator[Proxy]:
    parts = urlsplit(redis_url)
    made = Proxy((parts.hostname or "127.0.0.1", parts.port or 6379))
    yield made
    made.close()


def _beat(heart: BoundedHeart) -> None:
    """One heartbeat, which must end (a hang here is the defect under test)."""
    beat = threading.Thread(target=heart._send, args=("worker-heartbeat",), daemon=True)
    beat.start()
    beat.join(timeout=60)
    assert not beat.is_alive(), "the heartbeat's publish did not give up"


def test_a_silent_broker_costs_each_beat_one_reconnect_and_one_warning_in_all(
    proxy: Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    events = Celery("heartbeat-test", broker=f"redis://127.0.0.1:{proxy.port}/0", set_as_current=False)
    events.conf.broker_transport_options = {"socket_timeout": 0.5}
    events.conf.broker_connection_timeout = 0.5
    connection = events.connection_for_write()
    dispatcher = events.events.Dispatcher(connection, hostname="test@heartbeat", enabled=True)
    heart = BoundedHeart(Timer(), dispatcher, interval=2)
    caplog.set_level(logging.INFO, logger="worker.runtime.heartbeat")
    try:
        _beat(heart)
        assert not heart.failing and caplog.messages == []
        proxy.silent = True
        _beat(heart)
        _beat(heart)
        assert heart.failing
        warned = [m for m in caplog.messages if "did not take the worker's heartbeat" in m]
        assert len(warned) == 1, caplog.messages
        proxy.silent = False
        _beat(heart)
        assert not heart.failing
        assert caplog.messages[-1] == "the broker takes the worker's heartbeat again"
    finally:
        dispatcher.close()
        connection.release()


def test_the_worker_consumer_runs_the_bounded_heartbeat_in_place_of_celerys() -> None:
    assert app.conf.worker_consumer == "worker.runtime.heartbeat:Consumer"
    steps = Consumer.Blueprint.default_steps
    assert "worker.runtime.heartbeat:BoundedHeartStep" in steps
    assert "celery.worker.consumer.heart:Heart" not in steps
    assert [s for s in steps if s != "worker.runtime.heartbeat:BoundedHeartStep"] == [
        s for s in CeleryConsumer.Blueprint.default_steps if s != "celery.worker.consumer.heart:Heart"
    ]
    assert steps.index("worker.runtime.heartbeat:BoundedHeartStep") == CeleryConsumer.Blueprint.default_steps.index(
        "celery.worker.consumer.heart:Heart"
    )
