"""Prometheus metrics of a worker, safe with the prefork pool (prometheus-client multiprocess mode).

Every pool process writes its samples to files in ``PROMETHEUS_MULTIPROC_DIR``
(set by ``prepare_environment`` before prometheus_client is imported); the
worker's main process serves them all on ``worker.metrics_port``, with the
broker's queue depths read at scrape time.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from celery import Celery

    from store.capture.control import CaptureState
    from store.embeddings.chain import EmbeddingStats
    from worker.pipeline import BatchResult

__all__ = ["observe_batch", "prepare_environment", "serve", "stage", "watch_embeddings"]

log = logging.getLogger(__name__)
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: Seconds the workers get to say which queues they consume, at each scrape.
CONSUMERS_TIMEOUT = 1.0


def prepare_environment() -> str:
    """Give this process tree a multiprocess metrics folder, before any metric exists.

    Runs when the worker app is imported: pool processes, forked or started
    fresh, inherit the variable, and prometheus_client reads it on its first
    import (lazily, below). The process that made the folder removes it at exit.
    """
    if not os.environ.get(MULTIPROC_ENV):
        folder = tempfile.mkdtemp(prefix="vectorsync-metrics-")
        os.environ[MULTIPROC_ENV] = folder
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    values = sys.modules.get("prometheus_client.values")
    if values is not None:  # already imported (celery's CLI loads flower's plugin): choose again
        values.ValueClass = values.get_value_class()  # type: ignore[attr-defined]
    return os.environ[MULTIPROC_ENV]


@dataclass(frozen=True)
class _Metrics:
    records: Any
    chunks: Any
    stats: dict[str, Any]
    cache: Any
    stages: Any


@functools.cache
def _metrics() -> _Metrics:
    from prometheus_client import Counter, Histogram

    return _Metrics(
        records=Counter("vectorsync_records", "Records processed, by outcome", ["collection", "outcome"]),
        chunks=Counter("vectorsync_chunks_embedded", "Chunks embedded and written", ["collection"]),
        stats={
            "calls": Counter("vectorsync_provider_calls", "Embedding provider calls", ["model"]),
            "retries": Counter("vectorsync_provider_retries", "Embedding provider retries", ["model"]),
            "failovers": Counter("vectorsync_provider_failovers", "Failovers away from a model", ["model"]),
        },
        cache=Counter("vectorsync_embedding_cache", "Embedding cache lookups", ["result"]),
        stages=Histogram("vectorsync_stage_seconds", "Time per pipeline stage", ["stage"],
                         buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)),
    )


def observe_batch(collection: str, result: BatchResult) -> None:
    """Count a batch's outcomes."""
    outcomes = {"indexed": len(result.indexed), "skipped": len(result.skipped), "deleted": len(result.deleted),
                "superseded": len(result.superseded), "failed": len(result.failed) + len(result.retry)}
    for outcome, count in outcomes.items():
        if count:
            _metrics().records.labels(collection, outcome).inc(count)
    if result.chunks:
        _metrics().chunks.labels(collection).inc(result.chunks)


def _on_stat(counter: str, key: str | None, amount: int) -> None:
    metrics = _metrics()
    if counter in metrics.stats and key is not None:
        metrics.stats[counter].labels(key).inc(amount)
    elif counter in ("cache_hits", "cache_misses"):
        metrics.cache.labels("hit" if counter == "cache_hits" else "miss").inc(amount)


def watch_embeddings(stats: EmbeddingStats) -> None:
    """Mirror the embeddings' counters (calls, retries, failovers, cache) into metrics."""
    stats.listener = _on_stat


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Time one pipeline stage."""
    start = time.perf_counter()
    try:
        yield
    finally:
        _metrics().stages.labels(name).observe(time.perf_counter() - start)


class QueueDepth:
    """Each queue's depth, the age of its oldest message and its consumers, asked when scraped.

    ``vectorsync_queue_consumers == 0`` while ``vectorsync_queue_depth > 0`` is the alert "work queued,
    nobody consuming"; ``vectorsync_queue_oldest_seconds`` says how long it has waited.
    """

    def __init__(self, app: Celery, broker_url: str, queues: tuple[str, ...]) -> None:
        #: The worker's Celery app, which broadcasts the ask for consumers (passed in: this module never
        #: imports ``worker.celery``, which imports it).
        self.app = app
        self.broker_url = broker_url
        self.queues = queues

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        from store.broker.queues import queue_states, worker_states

        depth = GaugeMetricFamily("vectorsync_queue_depth", "Tasks waiting in each queue", labels=["queue"])
        oldest = GaugeMetricFamily("vectorsync_queue_oldest_seconds", "Age of the oldest task waiting in each "
                                   "queue (0 when empty)", labels=["queue"])
        consumers = GaugeMetricFamily("vectorsync_queue_consumers", "Workers consuming each queue", labels=["queue"])
        try:
            workers = worker_states(self.app, timeout=CONSUMERS_TIMEOUT, active=False)
            states = queue_states(self.broker_url, self.queues, workers)
        except Exception as exc:  # a scrape must not fail because the broker is down
            log.warning("queue metrics unavailable: %s", exc)
            states = []
        for state in states:
            depth.add_metric([state.name], float(state.depth))
            oldest.add_metric([state.name], float(state.oldest_seconds or 0.0))
            consumers.add_metric([state.name], float(len(state.consumers)))
        yield from (depth, oldest, consumers)


class CaptureLag:
    """Each captured collection's outbox, asked when scraped: rows waiting and the age of the oldest.

    ``vectorsync_capture_lag_seconds`` rising means changes are written but not relayed (no worker runs the
    relay, or the broker is down); 0 when nothing waits.
    """

    def __init__(self, report: Callable[[], list[CaptureState]]) -> None:
        self.report = report

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        pending = GaugeMetricFamily("vectorsync_capture_pending", "Captured changes waiting in the outbox",
                                    labels=["collection"])
        lag = GaugeMetricFamily("vectorsync_capture_lag_seconds", "Age of the oldest captured change waiting in "
                                "the outbox (0 when none waits)", labels=["collection"])
        try:
            states = self.report()
        except Exception as exc:  # a scrape must not fail because a source database is down
            log.warning("capture metrics unavailable: %s", exc)
            states = []
        for state in states:
            if state.error is None:
                pending.add_metric([state.collection], float(state.pending))
                lag.add_metric([state.collection], float(state.lag_seconds or 0.0))
        yield from (pending, lag)


def serve(port: int, *, app: Celery, broker_url: str, queues: tuple[str, ...],
          capture: Callable[[], list[CaptureState]] | None = None) -> Any:
    """Serve every pool process's metrics, plus queue depths (and with ``capture``, the outbox of each captured
    collection), on ``port`` (0.0.0.0)."""
    from prometheus_client import CollectorRegistry, multiprocess, start_http_server

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    registry.register(QueueDepth(app, broker_url, queues))  # type: ignore[arg-type]
    if capture is not None:
        registry.register(CaptureLag(capture))  # type: ignore[arg-type]
    server, _thread = start_http_server(port, registry=registry)
    return server


def process_exited(pid: int) -> None:
    """Drop a dead pool process's live gauges (counters are kept, as Prometheus expects)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid)

