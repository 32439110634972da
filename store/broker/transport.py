"""kombu's Redis transport, less the gap that lost a task when the broker restarted.

kombu takes a message off its queue with ``BRPOP`` and records it as unacknowledged (``QoS.append``) in a
second round trip. A broker that goes away between the two (restarted, killed, cut off) has already
removed the message, durably with AOF, and never records it: the task is in neither place, nothing
redelivers it, and a run waiting for that batch stays ``running``. Here a message whose record fails is
kept in this process and pushed back to the head of its queue, marked redelivered, before the next
``BRPOP`` on the same broker. What is still not covered is a ``BRPOP`` reply lost on the wire (the
message then left Redis and never reached the worker); the reconcile sweep ends such a run and heals the
index. See docs/operations.md ("Delivery").
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import redis.exceptions as redis_errors
from kombu.transport import redis

__all__ = ["Channel", "QoS", "Transport", "broker_key", "unrecorded"]

log = logging.getLogger(__name__)

#: Messages taken off a queue whose unacknowledged record failed, per broker: (payload, exchange, routing key).
_UNRECORDED: dict[str, list[tuple[dict[str, Any], str, str]]] = {}
_LOCK = threading.Lock()


def broker_key(params: dict[str, Any]) -> str:
    """Which Redis a channel's connection parameters name: host and port (or socket path), and database."""
    where = params.get("path") or f"{params.get('host')}:{params.get('port')}"
    return f"{where}/{params.get('db', params.get('virtual_host')) or 0}"


def unrecorded(host: str, port: int, db: int = 0) -> int:
    """How many messages taken from the Redis at ``host:port/db`` wait to be pushed back."""
    with _LOCK:
        return len(_UNRECORDED.get(broker_key({"host": host, "port": port, "db": db}), ()))


class QoS(redis.QoS):
    """kombu's QoS, keeping a message it could not record as unacknowledged (module docstring), and taking a
    late ack or reject of a closed channel's message as the connection error it is."""

    def ack(self, delivery_tag: str) -> None:
        self._open()
        super().ack(delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        self._open()
        super().reject(delivery_tag, requeue=requeue)

    def restore_unacked(self, client: Any = None) -> Any:
        self._open()
        return super().restore_unacked(client)

    def _open(self) -> None:
        """A task that ends after its channel's connection was closed (the broker went away meanwhile) is acked
        on that channel. kombu then fails with an AttributeError (its transport no longer has a client), which
        is no connection error: Celery does not swallow it, it escapes the worker's event loop, and the worker
        stops consuming for good. As a connection error it is logged, and the message, still unacknowledged in
        Redis, comes back after the visibility timeout."""
        transport = getattr(self.channel, "connection", None)
        if transport is None or transport.client is None:
            raise redis_errors.ConnectionError(f"the channel of this message was closed ({self.channel.broker})")

    def append(self, message: Any, delivery_tag: str) -> None:
        try:
            super().append(message, delivery_tag)
        except self.channel.connection_errors:
            delivery = message.delivery_info
            with _LOCK:
                _UNRECORDED.setdefault(self.channel.broker, []).append(
                    (message._raw, delivery["exchange"], delivery["routing_key"])
                )
            log.warning(
                "the broker went away as it handed over message %s; it goes back to its queue once the broker answers",
                delivery_tag,
            )
            raise


class Channel(redis.Channel):
    """kombu's Redis channel, pushing back what its QoS could not record before it waits for more."""

    QoS = QoS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Which broker this is, for ``_UNRECORDED``: a closed connection no longer says.
        self.broker = broker_key(self._connparams())

    def _brpop_start(self, timeout: int | None = None) -> None:
        self._push_back()
        super()._brpop_start(timeout)

    def _push_back(self) -> None:
        with _LOCK:
            waiting = _UNRECORDED.pop(self.broker, [])
        if not waiting:
            return
        try:
            with self.conn_or_acquire() as client, client.pipeline() as pipe:
                for payload, exchange, routing_key in reversed(waiting):  # the first taken is the next given
                    self._do_restore_message(payload, exchange, routing_key, pipe)
                pipe.execute()
        except self.connection_errors:
            with _LOCK:
                _UNRECORDED.setdefault(self.broker, [])[:0] = waiting
            raise
        log.warning("pushed %d message(s) back to their queues that the broker took as it went away", len(waiting))


class Transport(redis.Transport):
    """kombu's Redis transport with ``Channel``."""

    Channel = Channel
