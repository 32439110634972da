"""What producers and workers agree on: task names, queues, Redis key prefixes and the states of a run.

A leaf module: it imports nothing of vectorsync's, so every side can import
it without loading anything else. Changing a value here breaks the wire
between producers and workers of different versions.
"""

from __future__ import annotations

import enum
from typing import TypedDict

__all__ = [
    "BUILD_INDEX",
    "BULK_QUEUE",
    "CACHE_KEY_PREFIX",
    "CHANGED_AT_HEADER",
    "FRESHNESS_KEY_PREFIX",
    "FRESHNESS_PATHS",
    "INDEX_BATCH",
    "INDEX_DOCUMENT",
    "INDEX_RECORD",
    "LANE_TICK",
    "LIVE_QUEUE",
    "PENDING_KEY_PREFIX",
    "POOL_BATCH",
    "POOL_KEY_PREFIX",
    "PUSHED_KEY_PREFIX",
    "QUEUES",
    "RATE_LIMIT_KEY_PREFIX",
    "RECONCILE",
    "REDELIVERED_KEY_PREFIX",
    "REDIS_SCHEMES",
    "REINDEX_ALL",
    "RESERVED_KEY_PREFIX",
    "ROUTES",
    "SENT_AT_HEADER",
    "VERIFIED_KEY_PREFIX",
    "VERIFY",
    "WORKER_COMMAND",
    "BatchMessage",
    "RunStatus",
    "pending_key",
]

#: Single records: latency matters.
LIVE_QUEUE = "vectorsync.live"
#: Reindex batches: throughput matters, and a backfill never starves live updates.
BULK_QUEUE = "vectorsync.bulk"
#: Every queue a worker should consume.
QUEUES = (LIVE_QUEUE, BULK_QUEUE)

INDEX_RECORD = "vectorsync.index_record"
INDEX_DOCUMENT = "vectorsync.index_document"
INDEX_BATCH = "vectorsync.index_batch"
REINDEX_ALL = "vectorsync.reindex_all"
RECONCILE = "vectorsync.reconcile"
BUILD_INDEX = "vectorsync.build_index"
#: Verifies a sample of a collection against its ledger (Celery beat, every ``worker.verify_seconds``).
VERIFY = "vectorsync.verify"
#: One look at a batch-lane run's jobs at the provider (``store.batches``), sent again until the run ends.
LANE_TICK = "vectorsync.lane_tick"

#: The queue each task goes to.
ROUTES = {
    INDEX_RECORD: LIVE_QUEUE,
    INDEX_DOCUMENT: LIVE_QUEUE,
    INDEX_BATCH: BULK_QUEUE,
    REINDEX_ALL: BULK_QUEUE,
    RECONCILE: BULK_QUEUE,
    BUILD_INDEX: BULK_QUEUE,
    VERIFY: BULK_QUEUE,
    LANE_TICK: BULK_QUEUE,
}

#: URL schemes of a Redis (coalescing and the embedding cache need one; a RabbitMQ URL is not).
REDIS_SCHEMES = ("redis://", "rediss://", "redis+socket://", "unix://", "sentinel://")
#: Prefix of the keys that mark a record whose index task is queued and not yet started.
PENDING_KEY_PREFIX = "vectorsync:pending:"
#: Prefix of the keys of a run's leftover pool: records left by its batches for full provider calls.
POOL_KEY_PREFIX = "vectorsync:pool:"
#: The number of a pooled run's last batch, which embeds what its other batches left in the pool.
POOL_BATCH = -1
#: Prefix of the embedding cache's keys.
CACHE_KEY_PREFIX = "vectorsync:emb:"
#: Prefix of the shared rate limits' buckets, one per model endpoint (``store.calls.ratelimit``).
RATE_LIMIT_KEY_PREFIX = "vectorsync:ratelimit:"
#: Prefix of the keys keeping each pushed document until a worker indexed it (``store.broker.pushes``).
PUSHED_KEY_PREFIX = "vectorsync:pushed:"
#: Prefix of the keys counting how often a task's message came back after its worker died or killed it.
REDELIVERED_KEY_PREFIX = "vectorsync:redelivered:"
#: Prefix of the keys holding what each capped run used, its calls in flight included (``store.broker.reservations``).
RESERVED_KEY_PREFIX = "vectorsync:reserved:"
#: Prefix of the keys keeping each collection's newest freshness samples (``store.broker.freshness_log``).
FRESHNESS_KEY_PREFIX = "vectorsync:freshness:"
#: The ``path`` label of ``vectorsync_freshness_seconds``: how a change came (a captured write, an app's send).
FRESHNESS_PATHS = ("capture", "app")
#: Prefix of the keys keeping each collection's last sampled verify (``store.verify.verdicts``).
VERIFIED_KEY_PREFIX = "vectorsync:verified:"
#: Message header holding when a task was sent (epoch seconds): how long a queue has waited.
SENT_AT_HEADER = "vectorsync_sent_at"
#: Message header holding when the change a task carries was written in its source (epoch seconds; the outbox
#: row's time, set by the capture relay): where a captured change's freshness is measured from.
CHANGED_AT_HEADER = "vectorsync_changed_at"
#: How to start a worker that consumes every queue (said when none does).
WORKER_COMMAND = "celery -A worker worker -Q " + ",".join(QUEUES)


def pending_key(collection: str, record_id: str) -> str:
    """Redis key marking a record whose index task is queued and not yet started."""
    return f"{PENDING_KEY_PREFIX}{collection}:{record_id}"


class BatchMessage(TypedDict, total=False):
    """The keyword arguments of an ``index_batch`` message, after ``collection`` and ``ids``, each optional:
    its run (``run_id``, None), its number in the run (``batch``, None; ``POOL_BATCH``: the pool batch), what
    earlier attempts counted (``carried``, None), whether its run pools leftovers (``pooled``, False),
    whether the ledger held none of its ids when the fan-out looked (``fresh``, False), and, in a batch-lane
    run, whether it gathers texts for the provider's batch endpoint (``lane`` "gather") or writes what came
    back ("write")."""

    run_id: str | None
    batch: int | None
    carried: dict[str, int] | None
    pooled: bool
    fresh: bool
    lane: str


class RunStatus(enum.StrEnum):
    """A run's state, as the worker writes it and producers and the CLI read it."""

    RUNNING = "running"
    #: Every record is in; the vector index deferred for the bulk load is being built.
    INDEXING = "indexing"
    DONE = "done"
    FAILED = "failed"
    #: Its next model call would have passed its budget: its batches wait, parked, for ``runs resume``. Not
    #: ended, and never stalled: it waits for a person, not for a worker.
    PAUSED = "paused"

    @property
    def ended(self) -> bool:
        return self in (RunStatus.DONE, RunStatus.FAILED)
