"""Prometheus metrics of a worker, safe with the prefork pool (prometheus-client multiprocess mode).

Every pool process writes its samples to files in ``PROMETHEUS_MULTIPROC_DIR``
(set by ``prepare_environment`` before prometheus_client is imported); the
worker's main process serves them all on ``worker.metrics_port``, with the
broker's queues, the state database's runs and failures and the capture
outboxes read at scrape time (``worker.gauges``).
"""

from __future__ import annotations

import atexit
import functools
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

    from store.calls.accounting import EmbeddingStats
    from store.capture.control import CaptureState
    from store.state.ledger import Ledger
    from worker.batches import BatchResult

__all__ = ["observe_batch", "prepare_environment", "serve", "stage", "watch_embeddings"]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


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
    reused: Any
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
        reused=Counter("vectorsync_vectors_reused", "Chunk vectors found already stored, not bought again"),
        stages=Histogram(
            "vectorsync_stage_seconds",
            "Time per pipeline stage",
            ["stage"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        ),
    )


def observe_batch(collection: str, result: BatchResult) -> None:
    """Count a batch's outcomes."""
    outcomes = {
        "indexed": len(result.indexed),
        "skipped": len(result.skipped),
        "deleted": len(result.deleted),
        "superseded": len(result.superseded),
        "failed": len(result.failed) + len(result.retry),
    }
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
    elif counter == "reused":
        metrics.reused.inc(amount)


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


def serve(
    port: int,
    *,
    app: Celery,
    broker_url: str,
    queues: tuple[str, ...],
    capture: Callable[[], list[CaptureState]] | None = None,
    open_ledger: Callable[[], Ledger] | None = None,
) -> Any:
    """Serve every pool process's metrics, plus what is read at each scrape (``worker.gauges``): the queues,
    with ``capture`` the outbox of each captured collection, with ``open_ledger`` the runs and failures; on
    ``port`` (0.0.0.0)."""
    from prometheus_client import CollectorRegistry, multiprocess, start_http_server

    from worker.gauges import CaptureLag, LedgerGauges, QueueGauges

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    registry.register(QueueGauges(app, broker_url, queues))
    if capture is not None:
        registry.register(CaptureLag(capture))
    if open_ledger is not None:
        registry.register(LedgerGauges(open_ledger))
    server, _thread = start_http_server(port, registry=registry)
    return server


def process_exited(pid: int) -> None:
    """Drop a dead pool process's live gauges (counters are kept, as Prometheus expects)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid)
