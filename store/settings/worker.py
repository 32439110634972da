"""``[worker]``: how long a task may take, how it retries, what beat runs, and what a worker exports."""

from __future__ import annotations

from pydantic import Field

from store.settings.section import Section

__all__ = ["WorkerSettings"]


class WorkerSettings(Section):
    #: Hard limit of one task, seconds; a task past it is killed and redelivered.
    time_limit: int = Field(default=1800, gt=0)
    #: Seconds an index build after a bulk load may take, from its start, across the tasks that wait for it in
    #: steps shorter than ``time_limit`` (the build runs on in PostgreSQL): past it, the build is cancelled and
    #: its run ends failed, naming this setting (docs/operations.md#index-builds).
    index_time_limit: int = Field(default=21_600, gt=0)
    #: Record ids per bulk batch task.
    batch_size: int = Field(default=100, gt=0, le=10_000)
    #: Id pages (of ``batch_size``) one fan-out step of a reindex reads before it queues a step of its own for the
    #: rest, behind the batches it sent: the bulk queue holds about this many batches of a run at a time, so
    #: Redis's memory does not grow with the source (docs/operations.md#the-fan-out).
    fanout_pages: int = Field(default=100, gt=0, le=100_000)
    #: Retries of a batch whose provider calls keep failing, before its records go to failures.
    max_retries: int = Field(default=5, ge=0)
    #: Times a task's message may come back after its pool process died under it or was killed at
    #: ``time_limit`` (out of memory, a crash, kill -9), before the task gives up on it: a batch's records go
    #: to failures (its run goes on), a fan-out's or sweep's run ends failed. Counted in the cache's Redis.
    max_redeliveries: int = Field(default=5, ge=1)
    #: First retry delay in seconds; doubles each time.
    retry_delay: float = Field(default=10, ge=0)
    #: Seconds between reconcile sweeps of each collection with a source, run by Celery beat (0: off).
    reconcile_seconds: int = Field(default=3600, ge=0)
    #: Seconds between sampled verifies of each collection, run by Celery beat (0: off); the verdict is
    #: exported as ``vectorsync_drifted_records``.
    verify_seconds: int = Field(default=86_400, ge=0)
    #: Records a sampled verify checks, drawn at random.
    verify_sample: int = Field(default=1000, gt=0)
    #: Prometheus metrics port of a worker (0: off).
    metrics_port: int = Field(default=0, ge=0, le=65535)
    #: Seconds within which 95% of changes should be searchable, from the writer's commit (captured) or the
    #: app's send: the freshness alert's target, exported as ``vectorsync_freshness_target_seconds``.
    freshness_target_seconds: float = Field(default=5.0, gt=0)
    #: Seconds without progress after which ``vectorsync status`` shows a running run stalled whose queue has
    #: consumers (with none it is stalled at once).
    stall_seconds: int = Field(default=300, gt=0)
