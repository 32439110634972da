"""store/transport/redis.py: the broker's Redis transport when the broker goes away just as it hands a message
over, is full, or is gone when a task is acked; and its bells.

kombu takes a message with ``BRPOP`` and records it as unacknowledged in a second round trip. A broker that
goes away in between, or whose reply is lost (a Redis killed with ``appendfsync always`` writes the pop to
its AOF before it answers), leaves the message in neither place. A proxy of the test's own between the
consumer and a real Redis makes that moment happen every time: the first reply that carries a message is
passed on or dropped, and the proxy goes down (every connection closed, new ones closed at once) until the
test brings it back.

Each scenario runs on every form of Redis URL a broker may have (``store.connect.redis_urls``): TCP, TLS
(the proxy ends and reopens the TLS, so it sees the commands) and a Unix socket. That each form, and a Sentinel's,
is consumed through this transport at all: ``test_redis_forms.py``.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import redis
from kombu import Connection

from store.connect.redis import redis_client
from store.transport.redis import BELL_MS, Transport, bell_key
from tests.integration.store.transport.channels import QUEUE, RESTORING, connect, held, publish
from tests.proxy import Proxy
from tests.services import redis_server, tls_certificate


class HandoverProxy(Proxy):
    """TCP to ``target`` that goes down at the first reply carrying a message, passing it on or not."""

    def __init__(self, target: tuple[str, int] | str, *, deliver: bool = True, **options: Any) -> None:
        self.down, self.armed, self.deliver = False, True, deliver
        self.waiting: set[socket.socket] = set()  # server ends of the connections a take was sent on
        super().__init__(target, **options)

    def accepting(self) -> bool:
        return not self.down

    def forward(self, source: socket.socket, sink: socket.socket, data: bytes) -> None:
        if b"BRPOP" in data or b"EVAL" in data:
            self.waiting.add(sink)
        elif self.armed and source in self.waiting and b"delivery_tag" in data:
            # Down before the reply goes out: the consumer's next command cannot get through.
            self.armed, self.down = False, True
            for other in [s for s in self.sockets if s not in (source, sink)]:
                other.close()
            if self.deliver:
                sink.sendall(data)
            sink.close()  # this pair only: ``down`` is the test's to lift from here on
            source.close()
            return
        sink.sendall(data)

    def come_back(self) -> None:
        self.down = False

    def close(self) -> None:
        self.down = True
        super().close()


def _proxy(url: str, *, deliver: bool) -> HandoverProxy:
    parts = urlsplit(url)
    if parts.scheme == "redis+socket":
        return HandoverProxy(parts.path, deliver=deliver)
    tls = tls_certificate(Path(parse_qs(parts.query)["ssl_ca_certs"][0]).parent) if parts.scheme == "rediss" else None
    return HandoverProxy((parts.hostname or "127.0.0.1", parts.port or 6379), deliver=deliver, tls=tls)


def _consume(url: str, transport: Any, got: list[Any], *, within: float = 5) -> None:
    """Take one message through ``transport``, acking it, within ``within`` seconds (else TimeoutError),
    restoring what the visibility timeout gives back each second as a worker's timer does; a broker that
    goes away raises."""
    deadline = time.monotonic() + within
    with (
        connect(url, transport, transport_options=RESTORING) as connection,
        connection.Consumer(
            QUEUE, callbacks=[lambda body, message: (got.append(body), message.ack())], accept=["json"]
        ),
    ):
        while not got:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing was consumed within {within} s")
            with contextlib.suppress(TimeoutError):
                connection.drain_events(timeout=1)
            connection.transport.cycle.maybe_restore_messages()


@pytest.mark.parametrize("deliver", [True, False], ids=["reply-delivered", "reply-lost"])
def test_a_message_handed_over_as_the_broker_goes_away_comes_back_once_it_is_back(server: str, deliver: bool) -> None:
    proxy = _proxy(server, deliver=deliver)
    try:
        publish(server, {"batch": 4})
        got: list[Any] = []
        with pytest.raises(Exception) as raised:
            _consume(proxy.url, None, got)
        assert isinstance(raised.value, Connection(server).connection_errors), raised.value
        assert got == ([{"batch": 4}] if deliver else [])  # its ack, if any, could not get through
        assert held(server) == (0, 1)  # taken and recorded in one step: never in neither place
        proxy.come_back()
        again: list[Any] = []
        _consume(proxy.url, None, again, within=30)  # back after the visibility timeout
        assert again == [{"batch": 4}]
        assert held(server) == (0, 0)
    finally:
        proxy.close()


def test_kombus_own_transport_still_loses_that_message(tcp_server: str) -> None:
    """The defect our transport closes, shown on kombu's: when this fails, kombu has fixed it upstream and
    ``store.transport.redis`` can go."""
    server = tcp_server
    proxy = _proxy(server, deliver=False)
    try:
        publish(server, {"batch": 4})
        with pytest.raises(Exception):  # noqa: B017 - whichever connection error kombu raises
            _consume(proxy.url, "redis", [])
        assert held(server) == (0, 0)  # popped, never recorded
        proxy.come_back()
        got: list[Any] = []
        with pytest.raises(TimeoutError):
            _consume(proxy.url, "redis", got, within=6)  # three visibility timeouts: nothing comes back
        assert got == []
    finally:
        proxy.close()


def test_a_publish_rings_its_queues_bell_and_an_idle_consumer_takes_at_once(server: str) -> None:
    """An idle consumer waits on the bell, not for its BRPOP timeout: a message published while it waits is
    taken at once, and the bell never holds more than one ring."""
    got: list[Any] = []
    with (
        connect(server, transport_options=RESTORING) as connection,
        connection.Consumer(
            QUEUE, callbacks=[lambda body, message: (got.append(body), message.ack())], accept=["json"]
        ),
    ):
        with contextlib.suppress(TimeoutError):
            connection.drain_events(timeout=1.5)  # found nothing, now waiting on the bell
        for n in range(3):
            publish(server, {"batch": n})
        client = redis_client(server, timeout=5)
        assert client.llen(bell_key(QUEUE.name)) == 1
        assert 0 < client.pttl(bell_key(QUEUE.name)) <= BELL_MS  # a reply queue's bell goes when it does
        start = time.monotonic()
        for _ in range(3):
            connection.drain_events(timeout=5)
        assert got == [{"batch": 0}, {"batch": 1}, {"batch": 2}]
        assert held(server) == (0, 0)
        assert time.monotonic() - start < 5
        client.close()


def test_a_broker_out_of_memory_hands_over_nothing_and_loses_nothing(
    server: str, caplog: pytest.LogCaptureFixture
) -> None:
    """kombu's ``BRPOP`` still pops from a full ``noeviction`` Redis and then fails to record the message: it
    is lost. ``TAKE`` writes its record before it pops, so a full broker refuses the whole take."""
    publish(server, {"batch": 5})
    client = redis_client(server, timeout=5)
    got: list[Any] = []
    with (
        connect(server, transport_options=RESTORING) as connection,
        connection.Consumer(
            QUEUE, callbacks=[lambda body, message: (got.append(body), message.ack())], accept=["json"]
        ),
    ):
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", 1)  # below what it holds: every write that grows memory is refused
        try:
            for _ in range(3):  # kombu's own restore sweep between polls is refused too
                with contextlib.suppress(TimeoutError, redis.exceptions.OutOfMemoryError):
                    connection.drain_events(timeout=1)
            assert "the broker refused to hand over a message" in caplog.text
            assert got == []
            assert held(server) == (1, 0)
        finally:
            client.config_set("maxmemory", 0)
        connection.drain_events(timeout=5)
    assert got == [{"batch": 5}]
    assert held(server) == (0, 0)
    client.close()


def test_a_restore_lock_left_by_a_killed_worker_holds_up_restores_for_seconds_not_minutes() -> None:
    """kombu restores unacknowledged messages under a lock; a worker killed holding it (as ``kill -9`` can)
    kept every other worker from restoring for kombu's 300 s, longer than a run's tasks wait."""
    from kombu.transport.redis import Mutex

    from store.broker.config import celery_config
    from store.settings import Settings

    with redis_server() as (url, _process):
        settings = Settings.model_validate(
            {"broker": {"url": url, "visibility_timeout": 4}, "worker": {"time_limit": 2, "index_time_limit": 2}}
        )
        options = celery_config(settings)["broker_transport_options"]
        publish(url, {"batch": 7})
        with Connection(url, transport=Transport, transport_options=options) as dead:
            channel = dead.default_channel
            message = channel.basic_get(QUEUE.name)  # taken and recorded as unacknowledged, never acked
            assert message is not None
            held = Mutex(channel.client, channel.unacked_mutex_key, channel.unacked_mutex_expire)
            held.__enter__()  # the killed worker's restore: the lock is never released
            client = redis.Redis.from_url(url)
            assert 0 < client.pttl(channel.unacked_mutex_key) <= options["unacked_restore_interval"] * 1000
            channel.do_restore = False  # killed: it restores nothing as it goes
        got: list[Any] = []
        deadline = 3 * (options["visibility_timeout"] + options["unacked_mutex_expire"])
        with (
            Connection(url, transport=Transport, transport_options=options) as survivor,
            survivor.Consumer(QUEUE, callbacks=[lambda body, m: (got.append(body), m.ack())], accept=["json"]),
        ):
            for _ in range(deadline):
                with contextlib.suppress(TimeoutError):
                    survivor.drain_events(timeout=1)
                if got:
                    break
        assert got == [{"batch": 7}]
        client.close()
        held.__exit__(None, None, None)  # expired long ago: nothing to release, nothing left to finalize


@pytest.mark.parametrize("transport", ["ours", "kombu's"])
def test_a_task_acked_after_its_connection_was_closed_is_a_logged_connection_error(transport: str) -> None:
    """A task that ends after the broker went away is acked on its closed channel: kombu raised AttributeError
    (its transport has no client any more), which escaped Celery's event loop and left the worker consuming
    nothing (the AOF restart failure's second path: a run stuck, every batch after the restart unconsumed)."""
    with redis_server() as (url, process):
        publish(url, {"batch": 9})
        connection = Connection(url, transport=Transport if transport == "ours" else "redis")
        channel = connection.default_channel
        message = channel.basic_get(QUEUE.name)
        assert message is not None
        process.kill()  # the broker goes away
        process.wait(timeout=10)
        with contextlib.suppress(Exception):  # what Celery's consumer does to the connection that broke
            connection.collect()
        with contextlib.suppress(Exception):
            connection.close()
        # As the worker's traceback had it: the channel's pool dropped by its close, its transport's client gone.
        channel._disconnect_pools()
        errors = connection.connection_errors + connection.channel_errors
        if transport == "ours":
            message.ack_log_error(logging.getLogger(__name__), errors)  # logged, not raised
        else:
            with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'hostname'"):
                message.ack_log_error(logging.getLogger(__name__), errors)
