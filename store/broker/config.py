"""The Celery configuration producers and workers share, built from the settings.

Producers send tasks by name with this configuration and never import the
worker, so enqueueing loads no embedding client, numpy or torch.
"""

from __future__ import annotations

from typing import Any

from store.contract import BULK_QUEUE, LIVE_QUEUE, RECONCILE, REDIS_SCHEMES, ROUTES
from store.settings import Settings
from store.settings.network import redis_options, tcp_options

__all__ = ["beat_schedule", "celery_config", "soft_time_limit"]


def celery_config(settings: Settings) -> dict[str, Any]:
    """Celery settings for at-least-once delivery of JSON tasks (never pickle)."""
    time_limit = settings.worker.time_limit
    return {
        "broker_url": settings.broker.url,
        "broker_connection_retry_on_startup": True,
        "broker_connection_timeout": settings.network.connect_timeout,
        "broker_heartbeat": settings.broker.heartbeat,
        "broker_transport_options": _transport_options(settings),
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
        "task_soft_time_limit": soft_time_limit(time_limit),
        "task_default_queue": LIVE_QUEUE,
        "task_routes": {name: {"queue": queue} for name, queue in ROUTES.items()},
        "task_create_missing_queues": True,
        "worker_send_task_events": True,
        "task_send_sent_event": True,
        "worker_hijack_root_logger": False,
        "beat_schedule": beat_schedule(settings),
    }


def soft_time_limit(hard: int) -> int:
    """The soft limit that goes with a hard one: 30 s of warning for a long task, none for a short one."""
    return hard - 30 if hard > 60 else hard


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
    options: dict[str, Any] = {
        "visibility_timeout": visibility, "unacked_restore_interval": max(1, min(10, visibility // 4)),
        "unacked_restore_throttle": 1, "queue_order_strategy": "priority"}
    if url.startswith(REDIS_SCHEMES):
        options |= {"socket_timeout": settings.broker.socket_timeout, **redis_options(url, settings.network)}
    elif url.startswith(("amqp://", "amqps://", "pyamqp://")):
        options["socket_settings"] = tcp_options(settings.network)
    return options


def beat_schedule(settings: Settings) -> dict[str, Any]:
    """A reconcile sweep per collection that has a source to compare with: every ``worker.reconcile_seconds``,
    and every ``capture.reconcile_seconds`` for a collection whose changes triggers capture (there it is only
    the safety net for writes no trigger sees)."""
    schedule = {}
    for name, collection in sorted(settings.collections.items()):
        if collection.source.kind == "push":
            continue
        captured = collection.source.capture == "trigger"
        every = settings.capture.reconcile_seconds if captured else settings.worker.reconcile_seconds
        if every:
            schedule[f"reconcile-{name}"] = {"task": RECONCILE, "schedule": float(every), "args": (name,),
                                             "options": {"queue": BULK_QUEUE}}
    return schedule
