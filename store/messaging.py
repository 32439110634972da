"""What producers and workers agree on: task names, queues and the Celery configuration.

Producers send tasks by name with these settings and never import the worker,
so enqueueing loads no embedding client, numpy or torch.
"""

from __future__ import annotations

from typing import Any

from store.settings import Settings

__all__ = [
    "BULK_QUEUE",
    "INDEX_BATCH",
    "INDEX_DOCUMENT",
    "INDEX_RECORD",
    "LIVE_QUEUE",
    "RECONCILE",
    "REDIS_SCHEMES",
    "REINDEX_ALL",
    "beat_schedule",
    "celery_config",
    "coalesce_key",
]

#: URL schemes of a Redis (coalescing and the embedding cache need one; a RabbitMQ URL is not).
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
#: Single records: latency matters.
LIVE_QUEUE = "vectorsync.live"
#: Reindex batches: throughput matters, and a backfill never starves live updates.
BULK_QUEUE = "vectorsync.bulk"

INDEX_RECORD = "vectorsync.index_record"
INDEX_DOCUMENT = "vectorsync.index_document"
INDEX_BATCH = "vectorsync.index_batch"
REINDEX_ALL = "vectorsync.reindex_all"
RECONCILE = "vectorsync.reconcile"

ROUTES = {
    INDEX_RECORD: LIVE_QUEUE,
    INDEX_DOCUMENT: LIVE_QUEUE,
    INDEX_BATCH: BULK_QUEUE,
    REINDEX_ALL: BULK_QUEUE,
    RECONCILE: BULK_QUEUE,
}


def coalesce_key(collection: str, record_id: str) -> str:
    """Redis key marking a record whose index task is queued and not yet started."""
    return f"vectorsync:pending:{collection}:{record_id}"


def celery_config(settings: Settings) -> dict[str, Any]:
    """Celery settings for at-least-once delivery of JSON tasks (never pickle)."""
    time_limit = settings.worker.time_limit
    return {
        "broker_url": settings.broker.url,
        "broker_connection_retry_on_startup": True,
        "broker_transport_options": {"visibility_timeout": settings.broker.visibility_timeout},
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "event_serializer": "json",
        "task_ignore_result": True,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_time_limit": time_limit,
        "task_soft_time_limit": max(1, time_limit - 30) if time_limit > 60 else time_limit,
        "task_default_queue": LIVE_QUEUE,
        "task_routes": {name: {"queue": queue} for name, queue in ROUTES.items()},
        "task_create_missing_queues": True,
        "worker_send_task_events": True,
        "task_send_sent_event": True,
        "worker_hijack_root_logger": False,
        "beat_schedule": beat_schedule(settings),
    }


def beat_schedule(settings: Settings) -> dict[str, Any]:
    """A reconcile sweep per collection that has a source to compare with."""
    every = settings.worker.reconcile_seconds
    if not every:
        return {}
    return {
        f"reconcile-{name}": {"task": RECONCILE, "schedule": float(every), "args": (name,),
                              "options": {"queue": BULK_QUEUE}}
        for name, collection in sorted(settings.collections.items())
        if collection.source.kind != "push"
    }
