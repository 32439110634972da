"""The Celery configuration producers and workers share, built from the settings.

Producers send tasks by name with this configuration and never import the
worker, so enqueueing loads no embedding client, numpy or torch.
"""

from __future__ import annotations

import math
from typing import Any

from store.connect.redis_urls import kombu_broker, redis_form
from store.contract import BULK_QUEUE, LIVE_QUEUE, RECONCILE, REDIS_SCHEMES, ROUTES, VERIFY
from store.settings import Settings
from store.settings.network import redis_options, tcp_options

__all__ = [
    "PUBLISH_RETRY_POLICY",
    "REDIS_TRANSPORT",
    "beat_schedule",
    "celery_config",
    "publish_seconds",
    "soft_time_limit",
]

#: The transport of a ``redis://`` or ``rediss://`` broker, by name (loaded when a connection is made, not at
#: import); ``store.connect.redis_urls.kombu_broker`` names the one of each form.
REDIS_TRANSPORT = "store.transport.redis:Transport"
#: How every publish retries (a task sent by a producer or by a task, a retry, the task-sent event): once, at
#: once, on a fresh connection, then the caller gets the error. Celery's default (3 retries, each reconnecting)
#: held a task 10.9 s in a publish to a silent Redis with 3 s socket and 2 s connect timeouts, measured.
PUBLISH_RETRY_POLICY: dict[str, Any] = {
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.5,
    "interval_max": 0.5,
}
#: Seconds the soft limit leaves a task, besides one publish, to record its retry and hand its result in.
HAND_IN_SECONDS = 2
#: The least warning a long task (a hard limit over twice this) gets before its hard limit.
LONG_WARNING_SECONDS = 30


def celery_config(settings: Settings) -> dict[str, Any]:
    """Celery settings for at-least-once delivery of JSON tasks (never pickle)."""
    time_limit = settings.worker.time_limit
    return {
        "broker_connection_retry_on_startup": True,
        "broker_connection_timeout": settings.network.connect_timeout,
        "broker_heartbeat": settings.broker.heartbeat,
        **_broker(settings),
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "event_serializer": "json",
        "task_ignore_result": True,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        # A task killed at its hard time limit goes back to the queue, as one whose worker died does (Celery
        # acks it by default: its batch was lost and its run never ended). The soft limit retries it first.
        "task_acks_on_timeout": False,
        "worker_prefetch_multiplier": 1,
        "task_time_limit": time_limit,
        "task_soft_time_limit": soft_time_limit(time_limit, settings),
        "task_publish_retry": True,
        "task_publish_retry_policy": PUBLISH_RETRY_POLICY,
        "task_default_queue": LIVE_QUEUE,
        "task_routes": {name: {"queue": queue} for name, queue in ROUTES.items()},
        "task_create_missing_queues": True,
        "worker_send_task_events": True,
        "task_send_sent_event": True,
        "worker_hijack_root_logger": False,
        "beat_schedule": beat_schedule(settings),
    }


def soft_time_limit(hard: int, settings: Settings) -> int | None:
    """The soft limit that goes with a hard one: early enough that a task it stops can send its retry to a
    broker gone silent (``publish_seconds``) and hand its result in before the hard limit; 30 s at least for a
    long task. None, the hard limit alone, when that would leave the task less than half its limit.

    A soft limit equal to the hard one gave the task no time: billiard arms the hard timer ``hard - soft`` = 0 s
    after the soft signal, so the kill lands while the task handles it, often while it writes its result into
    the pool's pipe, and a result half-written there takes the worker's main process down ("Unrecoverable
    error" in ``celery.concurrency.asynpool``).
    """
    reserve = publish_seconds(settings) + HAND_IN_SECONDS
    if hard > 2 * LONG_WARNING_SECONDS:
        reserve = max(reserve, LONG_WARNING_SECONDS)
    soft = hard - math.ceil(reserve)
    return soft if soft >= hard / 2 else None


def publish_seconds(settings: Settings) -> float:
    """The longest one publish waits on a broker gone silent: each attempt of ``PUBLISH_RETRY_POLICY`` may open a
    connection (``network.connect_timeout``) and wait for the answer (``broker.socket_timeout`` on Redis; on AMQP
    TCP_USER_TIMEOUT drops the connection, or the heartbeat notices), with the pause between attempts."""
    url, network = settings.broker.url, settings.network
    if url.startswith(REDIS_SCHEMES):
        answer = settings.broker.socket_timeout
    else:
        answer = network.tcp_user_timeout or 2 * settings.broker.heartbeat
    retries = PUBLISH_RETRY_POLICY["max_retries"]
    return float((retries + 1) * (network.connect_timeout + answer) + retries * PUBLISH_RETRY_POLICY["interval_max"])


def _broker(settings: Settings) -> dict[str, Any]:
    """The broker's URL, transport and their options. A Redis broker, in every form of URL, goes through
    ``store.transport.redis``: kombu's Redis transport, less a gap that lost the message a restarting broker
    was handing over."""
    url = settings.broker.url
    if redis_form(url) is None:
        return {"broker_url": url, "broker_transport_options": _transport_options(settings)}
    broker = kombu_broker(url)
    return {
        "broker_url": broker.url,
        "broker_transport": broker.transport,
        "broker_transport_options": _transport_options(settings) | broker.transport_options,
        **({"broker_use_ssl": broker.use_ssl} if broker.use_ssl is not None else {}),
    }


def _transport_options(settings: Settings) -> dict[str, Any]:
    """Redis: tasks of a worker that died come back after ``visibility_timeout``; look for them every
    quarter of it (at most every 10 s, one cheap sorted-set query), not kombu's default of every ~100 s.
    Queues are read in the order the worker lists them (``-Q vectorsync.live,vectorsync.bulk``): a pool
    process that frees up takes a waiting live update before the next backfill batch.

    A broker gone silent is noticed (``[network]``, ``broker.socket_timeout``): a command waits at most
    ``socket_timeout``, TCP keepalive and TCP_USER_TIMEOUT drop a dead connection, and kombu checks the
    consumer's waiting connections every ``health_check_interval``. AMQP gets the same TCP options, and
    ``broker.heartbeat`` (in ``celery_config``)."""
    visibility, url = settings.broker.visibility_timeout, settings.broker.url
    every = max(1, min(10, visibility // 4))
    # The lock a restore holds for milliseconds outlives a worker killed while holding it (and, with AOF, a
    # broker restart) by its expiry: kombu's 300 s kept every other worker from restoring for 5 minutes.
    # Restoring a tag is a WATCHed transaction, so two restorers after a short expiry still restore it once.
    options: dict[str, Any] = {
        "visibility_timeout": visibility,
        "unacked_restore_interval": every,
        "unacked_mutex_expire": every,
        "unacked_restore_throttle": 1,
        "queue_order_strategy": "priority",
    }
    if url.startswith(REDIS_SCHEMES):
        options |= {"socket_timeout": settings.broker.socket_timeout, **redis_options(url, settings.network)}
    elif url.startswith(("amqp://", "amqps://", "pyamqp://")):
        options["socket_settings"] = tcp_options(settings.network)
    return options


def beat_schedule(settings: Settings) -> dict[str, Any]:
    """A reconcile sweep per collection: every ``worker.reconcile_seconds``, and every
    ``capture.reconcile_seconds`` for a collection whose changes triggers capture (there it is only the safety
    net for writes no trigger sees). A pushed collection's sweep sends again the pushes no worker took
    (``store.broker.pushes``), which needs a Redis to keep them in. And a sampled verify per collection every
    ``worker.verify_seconds`` (``store.verify.verdicts``)."""
    schedule = {}
    for name, collection in sorted(settings.collections.items()):
        if collection.source.kind == "push" and not settings.cache_url.startswith(REDIS_SCHEMES):
            continue
        captured = collection.source.capture == "trigger"
        every = settings.capture.reconcile_seconds if captured else settings.worker.reconcile_seconds
        if every:
            schedule[f"reconcile-{name}"] = {
                "task": RECONCILE,
                "schedule": float(every),
                "args": (name,),
                "options": {"queue": BULK_QUEUE},
            }
        if settings.worker.verify_seconds:
            schedule[f"verify-{name}"] = {
                "task": VERIFY,
                "schedule": float(settings.worker.verify_seconds),
                "args": (name,),
                "options": {"queue": BULK_QUEUE},
            }
    return schedule
