"""What a worker process holds: its client's parts (settings, store, embeddings, ledger, router) and, per
generation, its pipeline and the jobs over it (``Jobs``).

Built on first use inside each process (after the prefork fork), so no
connection is shared between processes. A task names a collection (written
to its live generation and the one a migration builds) or one generation
(``NAME__gN``); each generation is indexed with its own chain and size.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from celery.exceptions import Retry, SoftTimeLimitExceeded

from store.batches.opened import lane_state
from store.batches.state import LaneState
from store.broker.coalescing import Coalescer
from store.broker.freshness_log import FreshnessLog
from store.broker.pushes import Pushes
from store.broker.redeliveries import Redeliveries
from store.broker.reservations import Reservations
from store.calls import spend
from store.client import Client, Hooks
from store.embeddings import Embeddings
from store.embeddings.cache import cache_scope
from store.errors import BudgetExceeded, ConfigError, StoreUnavailable
from store.process.defaults import ProcessDefault
from store.settings import Settings, load_settings
from store.state.generations import Generation, parse_name
from store.state.generations.routing import Router
from store.state.ledger import Ledger, ledger_from_settings
from store.vectors.base import Collection, VectorStore
from worker.metrics.series import watch_embeddings
from worker.pipeline.batch import BatchResult, as_failed, as_retry
from worker.pipeline.chunker import Chunker
from worker.pipeline.core import Pipeline, Recipe
from worker.pipeline.documents import DocumentWriter
from worker.pipeline.indexer import Indexer
from worker.pipeline.leftovers import LeftoverPool
from worker.pipeline.sweeper import Sweeper
from worker.sources import Source, source_from_settings

__all__ = ["Jobs", "WorkerContext", "context", "reset_context", "use_context"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Jobs:
    """One generation's pipeline and the job over it each kind of task runs: a batch of ids indexed, pushed
    documents written, the source compared with the ledger."""

    pipeline: Pipeline
    indexer: Indexer
    documents: DocumentWriter
    sweeper: Sweeper

    @classmethod
    def over(cls, pipeline: Pipeline) -> Jobs:
        return cls(pipeline, Indexer(pipeline), DocumentWriter(pipeline), Sweeper(pipeline))


@dataclass
class WorkerContext:
    """A worker process's parts: its client's (settings, store, embeddings, ledger, router), the coalescing
    marks, and the pipelines (with their jobs) and sources built for the collections its tasks name."""

    #: The client the parts come from, which builds and closes them.
    client: Client
    coalescer: Coalescer
    _jobs: dict[tuple[Any, ...], Jobs] = field(default_factory=dict)
    _sources: dict[str, Source] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _pool: list[LeftoverPool | None] = field(default_factory=list)
    _redeliveries: list[Redeliveries] = field(default_factory=list)
    _pushes: list[Pushes] = field(default_factory=list)
    _freshness: list[FreshnessLog] = field(default_factory=list)
    _reservations: list[Reservations | None] = field(default_factory=list)
    _lane: list[LaneState] = field(default_factory=list)

    @classmethod
    def from_settings(cls, settings: Settings, *, ledger: Ledger | None = None) -> WorkerContext:
        """Everything the settings name, built as a ``store.Client`` builds it; ``ledger`` replaces the state
        database's (an in-memory one)."""
        return cls.of(
            Client(
                settings,
                ledger=ledger if ledger is not None else ledger_from_settings(settings),
                hooks=Hooks(on_embeddings=lambda built: watch_embeddings(built.stats)),
            )
        )

    @classmethod
    def of(cls, client: Client) -> WorkerContext:
        """The context over ``client`` (its ledger given, as a worker's must be: runs and locks are shared)."""
        settings = client.settings
        return cls(
            client,
            Coalescer(settings.cache_url, ttl_seconds=settings.broker.coalesce_seconds, network=settings.network),
        )

    @property
    def settings(self) -> Settings:
        return self.client.settings

    @property
    def store(self) -> VectorStore:
        return self.client.store

    @property
    def embeddings(self) -> Embeddings:
        return self.client.embeddings

    @property
    def ledger(self) -> Ledger:
        return self.client.ledger

    @property
    def router(self) -> Router:
        """Where a read and a write of each name go, with each generation's store and embeddings (the Client's
        ``generations`` is the registry; this decides with it)."""
        return self.client.router

    def leftovers(self) -> LeftoverPool | None:
        """The runs' leftover pools (``worker.pipeline.leftovers``), in the cache's Redis; None when the embedding
        cache is off or not a Redis: a record whose first chunks a full call embedded would then embed them again."""
        with self._lock:
            if not self._pool:
                usable = self.settings.embeddings.cache_ttl_days > 0
                self._pool.append(
                    LeftoverPool.from_url(self.settings.cache_url, network=self.settings.network) if usable else None
                )
            return self._pool[0]

    def redeliveries(self) -> Redeliveries:
        """The count of each message's redeliveries, in the cache's Redis; kept for as long as a message may
        take to come back that many times (the visibility timeout each)."""
        with self._lock:
            if not self._redeliveries:
                settings = self.settings
                ttl = settings.broker.visibility_timeout * (settings.worker.max_redeliveries + 2)
                self._redeliveries.append(Redeliveries(settings.cache_url, ttl_seconds=ttl, network=settings.network))
            return self._redeliveries[0]

    def pushes(self) -> Pushes:
        """The pushed documents kept until indexed (``store.broker.pushes``), in the cache's Redis."""
        with self._lock:
            if not self._pushes:
                self._pushes.append(Pushes(self.settings.cache_url, network=self.settings.network))
            return self._pushes[0]

    def freshness(self) -> FreshnessLog:
        """The collections' newest freshness samples (``store.broker.freshness_log``), in the cache's Redis."""
        with self._lock:
            if not self._freshness:
                self._freshness.append(FreshnessLog(self.settings.cache_url, network=self.settings.network))
            return self._freshness[0]

    def reservations(self) -> Reservations | None:
        """Capped runs' totals shared by every worker process (``store.broker.reservations``), in the cache's
        Redis; None when the cache is not a Redis: each process then counts only its own calls in flight."""
        with self._lock:
            if not self._reservations:
                self._reservations.append(Reservations.from_url(self.settings.cache_url, network=self.settings.network))
            return self._reservations[0]

    def lane_state(self) -> LaneState:
        """Batch-lane runs' texts, jobs and waiting batches (``store.batches``), beside the ledger."""
        with self._lock:
            if not self._lane:
                self._lane.append(lane_state(self.ledger))
            return self._lane[0]

    def pipeline(self, name: str) -> Pipeline:
        """The pipeline of the generation a read of ``name`` goes to: a collection's live one, or the generation
        ``NAME__gN`` names (a run). Raises ConfigError for a collection that is not configured."""
        return self.jobs_of(self.router.reading(name)).pipeline

    def started(self, name: str) -> Sweeper:
        """The Sweeper of ``name`` for a run that starts on it (a reindex, a reconcile sweep). Its collection
        is created again if another process dropped it since this one opened it, as a worker's start would."""
        generation = self.router.reading(name)
        jobs = self.jobs_of(generation)
        jobs.pipeline.collection = self.router.ensure(generation)
        return jobs.sweeper

    def written(
        self,
        name: str,
        ids: Sequence[str],
        action: Callable[[Jobs], BatchResult],
        *,
        alone: Callable[[Jobs], BatchResult] | None = None,
    ) -> dict[str, BatchResult]:
        """``action`` on each generation a write of ``name`` goes to, by physical collection; ``alone`` instead,
        when given and the write goes to one generation only (a batch pools its leftovers only then).

        Only the live generation's errors propagate. A building generation's (its model's key missing here,
        its provider down) become its records' failures or retries, so a migration never stops the live index.
        """
        results: dict[str, BatchResult] = {}
        targets = self.router.writing(name)
        if alone is not None and len(targets) == 1:
            action = alone
        for number, generation in enumerate(targets):
            try:
                with spend.charged_to(generation.collection, generation.number):
                    results[generation.physical] = action(self.jobs_of(generation))
            except (Retry, SoftTimeLimitExceeded, BudgetExceeded):
                raise
            except StoreUnavailable as exc:
                if not number:
                    raise
                results[generation.physical] = as_retry(ids, exc)
            except Exception as exc:
                if not number:
                    raise
                log.warning("writing %d records of %s failed: %s", len(ids), generation.name, exc)
                results[generation.physical] = as_failed(ids, exc)
        return results

    def jobs_of(self, generation: Generation) -> Jobs:
        key = (generation.physical, generation.signature())
        with self._lock:
            if key not in self._jobs:
                self._jobs[key] = Jobs.over(self._build(generation))
            return self._jobs[key]

    def _build(self, generation: Generation) -> Pipeline:
        collection = generation.collection
        config = self.settings.collections.get(collection)
        if config is None:
            known = ", ".join(sorted(self.settings.collections)) or "none"
            base, number = parse_name(collection)
            hint = (
                f"{collection!r} names generation {number} of {base!r}, which has none: check the name"
                if number is not None
                else f"add [collections.{collection}]"
            )
            raise ConfigError(f"collection {collection!r} is not configured ({hint}; configured: {known})")
        if collection not in self._sources:
            self._sources[collection] = source_from_settings(collection, config.source, network=self.settings.network)
        _, embeddings = self.router.parts(generation)
        pipeline = Pipeline(
            name=generation.physical,
            collection=self.router.collection(generation),
            source=self._sources[collection],
            recipe=Recipe(
                Chunker.from_settings(config.chunker), embeddings if embeddings is not None else self.embeddings
            ),
            ledger=self.ledger,
            limits=self.settings.limits,
        )
        pipeline.replaces = lambda: self._replaced(generation, pipeline)
        pipeline.cache_scope = cache_scope(config, collection)
        return pipeline

    def _replaced(self, generation: Generation, pipeline: Pipeline) -> list[Collection]:
        """The live generation's collection, when ``generation`` is another generation of its collection (one a
        migration builds) embedded by the same model at the same size: it holds the vectors this one would buy."""
        live = self.router.reading(generation.collection)
        if live.physical == generation.physical:
            return []
        replaced = self.jobs_of(live).pipeline
        alike = (replaced.embeddings.space, replaced.collection.dimensions) == (
            pipeline.embeddings.space,
            pipeline.collection.dimensions,
        )
        return [replaced.collection] if alike else []

    def close(self, *, client: bool = True) -> None:
        """Release the sources, pools and coalescer; with ``client``, the client and its ledger too (False: a
        context over a client its caller still uses, as ``explain``'s is)."""
        for source in self._sources.values():
            source.close()
        for pool in self._pool:
            if pool is not None:
                pool.close()
        self.coalescer.close()
        for redeliveries in self._redeliveries:
            redeliveries.close()
        for pushes in self._pushes:
            pushes.close()
        for kept in self._freshness:
            kept.close()
        for reservations in self._reservations:
            if reservations is not None:
                reservations.close()
        if not client:
            return
        ledger = self.ledger  # given to the client (``of``), so its close leaves it open
        self.client.close()
        ledger.close()


_context: ProcessDefault[WorkerContext] = ProcessDefault(lambda: WorkerContext.from_settings(load_settings()))


def context() -> WorkerContext:
    """This process's context, built from ``load_settings()`` on first use."""
    return _context.get()


def reset_context() -> None:
    """Drop this process's context (after a fork, or in tests)."""
    _context.use(None)


def use_context(ctx: WorkerContext | None) -> WorkerContext | None:
    """Make ``ctx`` this process's context (None: built again on next use); returns the previous one.
    For running tasks in a test process (``producer.testing``)."""
    return _context.use(ctx)
