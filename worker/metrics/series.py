"""Prometheus metrics of a worker, safe with the prefork pool (prometheus-client multiprocess mode).

Every pool process writes its samples to files in ``PROMETHEUS_MULTIPROC_DIR``
(set by ``prepare_environment`` before prometheus_client is imported); the
worker's main process serves them all on ``worker.metrics_port``, with the
broker's queues, the state database's runs and failures and the capture
outboxes read at scrape time (``worker.metrics.gauges``).

Every series whose labels are known when the worker starts is there from its first scrape, at 0
(``start_series``): ``rate()`` and ``increase()`` need a sample before the first event. The label values
are listed once, in ``known_labels``.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sized
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from store.calls.accounting import EmbeddingStats
    from store.settings import Settings

__all__ = [
    "CACHE_RESULTS",
    "OUTCOMES",
    "STAGES",
    "KnownLabels",
    "Outcome",
    "known_labels",
    "observe_batch",
    "prepare_environment",
    "serve",
    "stage",
    "start_series",
    "watch_embeddings",
]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


class Outcome(Protocol):
    """What a batch's result tells the metrics (``worker.pipeline.batch.BatchResult`` is one): a Protocol, so the
    metrics, which the pipeline reports to, never import the pipeline."""

    @property
    def indexed(self) -> Sized: ...
    @property
    def skipped(self) -> Sized: ...
    @property
    def deleted(self) -> Sized: ...
    @property
    def superseded(self) -> Sized: ...
    @property
    def failed(self) -> Sized: ...
    @property
    def retry(self) -> Sized: ...
    @property
    def chunks(self) -> int: ...


#: The ``outcome`` label of ``vectorsync_records_total``, each a part of a batch's result.
OUTCOMES = ("indexed", "skipped", "deleted", "superseded", "failed")
#: The ``stage`` label of ``vectorsync_stage_seconds``: the pipeline's stages (``worker.pipeline.indexer``).
STAGES = ("load", "embed", "write")
#: The ``result`` label of ``vectorsync_embedding_cache_total``.
CACHE_RESULTS = ("hit", "miss")
#: The ``task`` label of the embedding chain's model metrics (``store.calls.failover.TASKS``).
EMBED_TASK = "embed"
#: The ``user`` label of calls no one is named for: a worker's.
NO_USER = ""


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
    freshness: Any


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
        freshness=Histogram(
            "vectorsync_freshness_seconds",
            "Seconds from a change (a captured write's commit, an app's send) to the commit that made it searchable",
            ["collection", "path"],
            buckets=(0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60, 300, 900, 3600),
        ),
    )


def freshness_histogram() -> Any:
    """``vectorsync_freshness_seconds{collection, path}`` (``worker.metrics.latency`` observes it)."""
    return _metrics().freshness


def observe_batch(collection: str, result: Outcome) -> None:
    """Count a batch's outcomes."""
    outcomes = {  # the keys of OUTCOMES
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


@dataclass(frozen=True, kw_only=True)
class KnownLabels:
    """The label values a worker knows when it starts, from its settings (the fixed ones are constants)."""

    #: The ``[models.NAME]`` entries of the embedding chain: the ``model`` of the provider and try metrics.
    entries: tuple[str, ...]
    #: Their models' names at their API: the ``model`` of ``vectorsync_model_calls`` and ``_tokens``.
    models: tuple[str, ...]
    #: The models (names at their API) that declare ``price_per_million_tokens``: the ``model`` of
    #: ``vectorsync_model_cost``.
    priced: tuple[str, ...] = ()
    #: The entries with a shared rate limit (``requests_per_minute`` or ``tokens_per_minute``).
    limited: tuple[str, ...]
    #: The declared collections.
    collections: tuple[str, ...]
    #: The queues the worker's metrics read (``store.contract.QUEUES``).
    queues: tuple[str, ...]
    #: Whether searches go through pgvector's planner, which counts their plans.
    planned: bool
    #: The freshness p95 the alert rule holds each collection to (``worker.freshness_target_seconds``).
    freshness_target: float = 5.0


def known_labels(settings: Settings) -> KnownLabels:
    """The label values known from ``settings``: the one place a worker decides its series at start."""
    from store.contract import QUEUES

    chain = [(name, settings.models[name]) for name in settings.embeddings.chain if name in settings.models]
    return KnownLabels(
        entries=tuple(name for name, _ in chain),
        models=tuple(dict.fromkeys(model.model for _, model in chain)),
        priced=tuple(dict.fromkeys(m.model for _, m in chain if m.price_per_million_tokens is not None)),
        limited=tuple(
            name
            for name, model in chain
            if model.requests_per_minute is not None or model.tokens_per_minute is not None
        ),
        collections=tuple(settings.collections),
        queues=tuple(QUEUES),
        planned=settings.vectors.store == "pgvector",
        freshness_target=settings.worker.freshness_target_seconds,
    )


def _series(known: KnownLabels) -> Iterator[tuple[Any, Iterable[tuple[str, ...]]]]:
    """Each labelled metric this worker writes, with the label values of every series known at start."""
    from store.calls.accounting import ERROR_KINDS, call_counters, cost_counter, try_metrics
    from store.calls.ratelimit import wait_histogram
    from store.contract import FRESHNESS_PATHS
    from store.vectors.timing import search_histogram

    metrics = _metrics()
    collections = [(name,) for name in known.collections]
    entries = [(entry,) for entry in known.entries]
    yield metrics.records, itertools.product(known.collections, OUTCOMES)
    yield metrics.chunks, collections
    for counter in metrics.stats.values():
        yield counter, entries
    yield metrics.cache, [(result,) for result in CACHE_RESULTS]
    yield metrics.stages, [(name,) for name in STAGES]
    yield metrics.freshness, itertools.product(known.collections, FRESHNESS_PATHS)
    for counter in call_counters():
        yield counter, itertools.product([EMBED_TASK], known.models, [NO_USER])
    yield cost_counter(), itertools.product([EMBED_TASK], known.priced)
    seconds, errors = try_metrics()
    yield seconds, itertools.product([EMBED_TASK], known.entries)
    yield errors, itertools.product([EMBED_TASK], known.entries, ERROR_KINDS)
    yield wait_histogram(), [(entry,) for entry in known.limited]
    yield search_histogram(), collections
    if known.planned:
        from store.vectors.pgvector.planner import PATHS, plan_metrics

        plans, rows = plan_metrics()
        yield plans, itertools.product(known.collections, PATHS)
        yield rows, collections


def start_series(settings: Settings) -> int:
    """Make every series whose labels ``settings`` tell at 0 (histograms with no observations); their count.

    Called in the worker's main process as it starts serving: in multiprocess mode its files hold the zeros
    for as long as the worker lives, summed with the pool processes' counts, so a pool process that has not
    yet touched a series (or one that replaced a dead one) leaves no gap.
    """
    made = 0
    for metric, label_sets in _series(known_labels(settings)):
        for labels in label_sets:
            metric.labels(*labels)
            made += 1
    return made


def serve(port: int, collectors: Iterable[Any]) -> Any:
    """Serve every pool process's metrics, plus what ``collectors`` read at each scrape (``worker.metrics.gauges``), on
    ``port`` (0.0.0.0)."""
    from prometheus_client import CollectorRegistry, multiprocess, start_http_server

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    for collector in collectors:
        registry.register(collector)
    server, _thread = start_http_server(port, registry=registry)
    return server


def process_exited(pid: int) -> None:
    """Drop a dead pool process's live gauges (counters are kept, as Prometheus expects)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid)
