"""What the broker holds and who consumes it: the workers, and each queue's depth, age and consumers.

Read by the CLI (``status``, ``doctor``, the no-worker warning) and by the
worker's Prometheus endpoint. Workers answer Celery's broadcast
(``active_queues``, ``active``); queue depth comes from the broker itself.
The age of a queue's oldest message comes from the ``sent_at`` header that
vectorsync puts on every task it sends: on Redis it is read with LINDEX, on
RabbitMQ by taking the head message and handing it straight back (it keeps
its place; its ``redelivered`` flag is set, which changes nothing here).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from store.contract import CHANGED_AT_HEADER, REDIS_SCHEMES, SENT_AT_HEADER

__all__ = ["QueueState", "WorkerState", "consumers_of", "queue_states", "sent_headers", "worker_states"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WorkerState:
    """A worker that answered: its name, the queues it consumes, the tasks it is running."""

    name: str
    queues: tuple[str, ...]
    active: int


@dataclass(frozen=True, slots=True)
class QueueState:
    """One queue: messages waiting, the age of the oldest in seconds (None: empty or unknown), consumers."""

    name: str
    depth: int
    oldest_seconds: float | None
    consumers: tuple[str, ...] = field(default=())


def sent_headers(changed_at: float | None = None) -> dict[str, float]:
    """Headers for a task being sent now, so that ``status`` can tell how long it has waited; with
    ``changed_at``, when the change it carries was written in its source (``CHANGED_AT_HEADER``)."""
    headers = {SENT_AT_HEADER: time.time()}
    if changed_at is not None:
        headers[CHANGED_AT_HEADER] = changed_at
    return headers


def worker_states(app: Any, *, timeout: float = 1.0, active: bool = True) -> list[WorkerState]:
    """The workers that answer within ``timeout`` seconds, by name; ``active=False`` skips asking for their
    running tasks (one broadcast instead of two). Raises what the broker connection raises."""
    inspect = app.control.inspect(timeout=timeout)
    queues: Mapping[str, list[dict[str, Any]]] = inspect.active_queues() or {}
    running: Mapping[str, list[Any]] = (inspect.active() or {}) if active else {}
    names = sorted(set(queues) | set(running))
    return [
        WorkerState(name, tuple(sorted(q["name"] for q in queues.get(name) or [])), len(running.get(name) or []))
        for name in names
    ]


def consumers_of(queue: str, workers: Iterable[WorkerState]) -> tuple[str, ...]:
    """The workers that consume ``queue``."""
    return tuple(w.name for w in workers if queue in w.queues)


def queue_states(broker_url: str, queues: Sequence[str], workers: Sequence[WorkerState] = ()) -> list[QueueState]:
    """Depth and oldest age of each queue, with its consumers among ``workers``. Raises on a dead broker."""
    read = _redis if broker_url.startswith(REDIS_SCHEMES) else _amqp
    found = read(broker_url, queues)
    return [
        QueueState(name, depth, age, consumers_of(name, workers))
        for name, (depth, age) in zip(queues, found, strict=True)
    ]


def _age(headers: Mapping[str, Any] | None, now: float) -> float | None:
    sent = (headers or {}).get(SENT_AT_HEADER)
    return max(now - float(sent), 0.0) if isinstance(sent, int | float) else None


def _redis(url: str, queues: Sequence[str]) -> list[tuple[int, float | None]]:
    from store.connect.redis import redis_client

    client = redis_client(url, timeout=2)
    try:
        found = []
        for queue in queues:
            # kombu LPUSHes and BRPOPs: the oldest message is at the right end.
            depth, oldest = client.llen(queue), client.lindex(queue, -1)
            headers = json.loads(oldest).get("headers") if oldest else None
            found.append((int(depth), _age(headers, time.time()) if depth else None))
        return found
    finally:
        client.close()


def _amqp(url: str, queues: Sequence[str]) -> list[tuple[int, float | None]]:
    from kombu.connection import Connection

    found = []
    with Connection(url, connect_timeout=2) as conn:
        for queue in queues:
            depth = _amqp_depth(conn, queue)
            found.append((depth, _amqp_oldest(conn, queue) if depth else None))
    return found


def _amqp_depth(conn: Any, queue: str) -> int:
    from kombu.exceptions import ChannelError

    channel = conn.channel()
    try:
        return int(channel.queue_declare(queue, passive=True).message_count)
    except ChannelError:  # never declared: nothing waiting (and the broker closed the channel)
        return 0
    finally:
        with contextlib.suppress(Exception):
            channel.close()


def _amqp_oldest(conn: Any, queue: str) -> float | None:
    channel = conn.channel()
    try:
        message = channel.basic_get(queue=queue, no_ack=False)
        if message is None:
            return None
        headers = getattr(message, "headers", None) or message.properties.get("application_headers")
        channel.basic_reject(message.delivery_tag, requeue=True)
        return _age(headers, time.time())
    finally:
        with contextlib.suppress(Exception):
            channel.close()
