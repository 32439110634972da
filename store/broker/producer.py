"""The producer side: enqueue indexing tasks by name, read run progress. Never imports the worker.

App code reaches it as ``Client.producer`` (``store.client``) or through ``producer``'s functions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, overload

from celery import Celery

from store.broker.caps import checked_caps, checked_prices, checked_resume_caps, unpriced_models
from store.broker.coalescing import Coalescer
from store.broker.config import celery_config
from store.broker.documents import document_id
from store.broker.pushes import Push, Pushes
from store.broker.queues import QueueState, WorkerState, queue_states, sent_headers, worker_states
from store.broker.refusals import checked_version, declared, pushed, record_id_of, record_label
from store.broker.versions import DocumentClock
from store.calls.spend import total
from store.connect.redis import REDIS_ERRORS
from store.contract import (
    BULK_QUEUE,
    INDEX_BATCH,
    INDEX_DOCUMENT,
    INDEX_RECORD,
    LANE_TICK,
    LIVE_QUEUE,
    QUEUES,
    RECONCILE,
    REINDEX_ALL,
    BatchMessage,
)
from store.errors import ConfigError
from store.settings import CollectionSettings, Settings
from store.state.generations import Generation
from store.state.generations.base import parse_name
from store.state.ledger import Ledger, RunProgress, ledger_from_settings
from store.vectors.records import check_collection_name, check_record_id, validate_metadata

__all__ = ["Producer", "Sender"]

#: Sends one task by name, called as Celery's ``send_task(name, args=..., queue=..., headers=...)`` is.
Sender = Callable[..., object]


log = logging.getLogger(__name__)


class Producer:
    """Sends vectorsync tasks through the broker the settings name.

    ``send`` replaces the broker (``producer.testing`` passes its in-memory queue); ``ledger`` is where runs
    are read and created (default: the state database's, connected on first use).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        send: Sender | None = None,
        ledger: Ledger | None = None,
        open_ledger: Callable[[], Ledger] | None = None,
    ) -> None:
        self.settings = settings
        self.app = Celery("vectorsync-producer", set_as_current=False)
        self.app.conf.update(celery_config(settings))
        self.send: Sender = send if send is not None else self.app.send_task
        self.coalescer = Coalescer(
            settings.cache_url, ttl_seconds=settings.broker.coalesce_seconds, network=settings.network
        )
        self.clock = DocumentClock(
            settings.cache_url, network=settings.network, shared=not settings.broker.url.startswith("memory://")
        )
        #: Each push kept until indexed, so that a sweep sends a lost one again (``store.broker.pushes``).
        self.pushes = Pushes(settings.cache_url, network=settings.network)
        self._ledger: Ledger | None = ledger
        self._open_ledger = open_ledger
        #: Whether the ledger is this producer's to close (not given, nor a client's).
        self._owns_ledger = ledger is None and open_ledger is None

    @property
    def ledger(self) -> Ledger:
        """Runs and failures, read from the state database (connected on first use)."""
        if self._ledger is None:
            self._ledger = (self._open_ledger or (lambda: ledger_from_settings(self.settings)))()
        return self._ledger

    def index_record(
        self, collection: str, record_id: str | int, *, coalesce: bool = True, changed_at: float | None = None
    ) -> bool:
        """Enqueue one record; False when it was already queued and not yet started (coalesced). Change capture
        passes ``coalesce=False``: it deletes its outbox rows once sent, so it must not trust a mark that a
        crash between marking and sending left behind; and ``changed_at``, when the source's row changed."""
        collection, key = declared(self.settings, collection, read=True), record_id_of(self.settings, record_id)
        if coalesce and not self.coalescer.claim(collection, key):
            return False
        try:
            self._send(INDEX_RECORD, (collection, key), LIVE_QUEUE, changed_at=changed_at)
        except Exception:
            if coalesce:
                self.coalescer.release(collection, key)
            raise
        return True

    def index_records(
        self,
        collection: str,
        record_ids: Iterable[str | int],
        *,
        coalesce: bool = True,
        changed_at: Mapping[str, float] | None = None,
    ) -> int:
        """Enqueue several records; returns how many were sent (the rest were already queued). ``changed_at``:
        when each record's row changed, by id (change capture's)."""
        times = changed_at or {}
        return sum(
            self.index_record(collection, i, coalesce=coalesce, changed_at=times.get(str(i))) for i in record_ids
        )

    def record_failure(self, collection: str, record_id: str, error: str) -> None:
        """Put a record no task can take (an id refused before sending) in the failures table."""
        self.ledger.record_failure(collection, record_id, error, run_id=None)

    def index_batch(self, collection: str, record_ids: Sequence[str | int], *, changed_at: float | None = None) -> None:
        """Enqueue ids as one bulk task, outside any run: how change capture sends a flood of changes (with
        ``changed_at``, the oldest change's time). An id the worker refuses (too long, say) gets its failures row
        there; its batch-mates are indexed."""
        ids = [record_id_of(self.settings, i) for i in record_ids]
        collection = declared(self.settings, collection, read=True)
        self._send(INDEX_BATCH, (collection, ids), BULK_QUEUE, changed_at=changed_at)

    @overload
    def index_document(
        self,
        collection: str,
        id: str | int | None,
        text: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        version: int | None = None,
    ) -> str: ...

    @overload
    def index_document(
        self, collection: str, *, text: str, metadata: Mapping[str, Any] | None = None, version: int | None = None
    ) -> str: ...

    def index_document(
        self,
        collection: str,
        id: str | int | None = None,
        text: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        version: int | None = None,
    ) -> str:
        """Enqueue a document with its content (for collections whose records are pushed); returns its id.

        The id is ``id`` when given, else the metadata field ``collections.NAME.source.id_field`` names, else
        a hash of the text and metadata, so the same document pushed twice is one record. A send older than
        the one indexed is dropped: ``version`` orders them (``store.broker.versions``: by default one clock
        every producer shares). Raises ConfigError, StoreUnavailable.
        """
        collection = check_collection_name(collection)
        label = record_label(id) if id is not None else "new document"
        config = pushed(self.settings, collection)
        if not isinstance(text, str):
            raise ConfigError(
                f"text of document {label!r} must be a string, got {type(text).__name__}: pass "
                "text=..., or use delete_document to remove a document"
            )
        clean = validate_metadata(metadata or {}, record_id=label)
        key = self._document_id(collection, text, clean, id, config)
        self.send_push(collection, Push(key, text, dict(clean), self._version(version, key), time.time()))
        return key

    def send_push(self, collection: str, push: Push) -> None:
        """Keep ``push`` (``store.broker.pushes``), then send it. A Redis that cannot keep it costs the copy, not
        the send (a warning says so, as coalescing does). Raises StoreUnavailable when the send fails."""
        try:
            self.pushes.keep(collection, push)
        except REDIS_ERRORS as exc:
            log.warning(
                "pushed document %r of %s is sent without a copy kept in Redis (%s): if its message is lost, no "
                "sweep sends it again",
                push.id,
                collection,
                exc,
            )
        try:
            self._send(INDEX_DOCUMENT, (collection, push.id, push.text, push.metadata, push.version), LIVE_QUEUE)
        except Exception:  # the caller is told it was not sent: no sweep sends it behind the caller's back
            self.pushes.settle(collection, push.id, push.version)
            raise

    def _version(self, version: int | None, label: str) -> int:
        return self.clock.next() if version is None else checked_version(version, label)

    def document_id(
        self, collection: str, text: str, metadata: Mapping[str, Any] | None = None, *, id: str | int | None = None
    ) -> str:
        """The id ``index_document`` gives this document (to delete it later, say). Raises ConfigError."""
        clean = validate_metadata(metadata or {}, record_id=record_label(id) if id is not None else "new document")
        return self._document_id(collection, text, clean, id, self.settings.collections.get(collection))

    def _document_id(
        self, collection: str, text: str, clean: Mapping[str, Any], id: object, config: CollectionSettings | None
    ) -> str:
        id_field = config.source.id_field if config is not None else None
        key = document_id(collection, text, clean, id=id, id_field=id_field)
        return check_record_id(key, max_chars=self.settings.limits.max_id_chars)

    def delete_document(self, collection: str, id: str | int, *, version: int | None = None) -> None:
        """Enqueue the removal of a pushed document; ``version`` as ``index_document``'s."""
        pushed(self.settings, collection)
        key = record_id_of(self.settings, id)
        self.send_push(check_collection_name(collection), Push(key, None, {}, self._version(version, key), time.time()))

    def reindex_all(
        self,
        collection: str,
        *,
        full: bool = False,
        allow_empty: bool = False,
        max_tokens: int | None = None,
        max_cost: float | None = None,
        batch: bool = False,
    ) -> str:
        """Start a reindex of the whole collection and return its run id at once; ``max_tokens``/``max_cost``:
        its caps (None: the collection's ``[collections.NAME.budget]``), past which it pauses; ``batch``: its
        embeddings bought through the batch lane (``store.batches``). Raises ConfigError for a collection the
        settings do not declare, or whose records are pushed (there is no source to read), or ``batch`` where its
        chain has no lane."""
        collection = declared(self.settings, collection, read=True)
        checked_caps(max_tokens, max_cost)
        if max_cost is not None:
            checked_prices(max_cost, self._unpriced(collection), collection)
        if batch:
            self._checked_lane(collection, capped=max_tokens is not None or max_cost is not None)
        run_id = self.ledger.create_run(collection, full=full)
        if batch:
            self.ledger.set_lane(run_id, "batch")
        if max_tokens is not None or max_cost is not None:
            self.ledger.set_caps(run_id, max_tokens=max_tokens, max_cost=max_cost)
        self._send_run(REINDEX_ALL, (collection, full, run_id, allow_empty), run_id)
        if batch:
            self._send(LANE_TICK, (run_id,), BULK_QUEUE)
        return run_id

    def cancel(self, run_id: str) -> None:
        """End a run that has not ended, as failed ("cancelled"); a look at its lane cancels its jobs at the provider.
        Raises ConfigError for a run that has ended."""
        run = self.ledger.run(run_id)
        if run.status.ended:
            raise ConfigError(f"run {run_id} has ended ({run.status}): there is nothing to cancel")
        self.ledger.fail_run(run_id, "cancelled (vectorsync runs cancel)")
        if run.lane == "batch":
            self._send(LANE_TICK, (run_id,), BULK_QUEUE)

    def _checked_lane(self, collection: str, *, capped: bool = False) -> None:
        from store.batches.models import checked_lanes

        checked_lanes(self.settings, self.ledger.generations, collection, capped=capped)

    def resume(self, run_id: str, *, max_tokens: int | None = None, max_cost: float | None = None) -> int:
        """Resume a paused run with these caps (None: its caps as they were): its parked batches sent again,
        each dropped from the ledger once the broker took it; how many were sent. A resume cut short is run
        again: a batch sent twice is counted once and writes its records whole, as any redelivered batch.
        Raises ConfigError for a run that is neither paused nor running, a cap at or below what it has spent, or a
        cost cap on a chain with a model that declares no price."""
        checked_caps(max_tokens, max_cost)
        if max_tokens is not None or max_cost is not None:
            self._checked_resume(run_id, max_tokens, max_cost)
        parked = self.ledger.resume_run(run_id, max_tokens=max_tokens, max_cost=max_cost)
        for batch in parked:
            message = BatchMessage(run_id=run_id, batch=batch.batch, carried=batch.carried)
            if batch.fresh:
                message["fresh"] = True
            self.send(
                INDEX_BATCH,
                args=(batch.collection, batch.ids),
                kwargs=message,
                queue=BULK_QUEUE,
                headers=sent_headers(),
            )
            self.ledger.unpark([batch])
        return len(parked)

    def _checked_resume(self, run_id: str, max_tokens: int | None, max_cost: float | None) -> None:
        """Refuse new caps of ``run_id`` that its spend has passed already, or a cost cap its models cannot count."""
        collection = self.ledger.run(run_id).collection
        if max_cost is not None:
            checked_prices(max_cost, self._unpriced(collection), collection)
        checked_resume_caps(run_id, total(self.ledger.run_spend(run_id)), max_tokens, max_cost)

    def _unpriced(self, collection: str) -> list[str]:
        """The models of the chains a run of ``collection`` (a name, or one generation's) embeds with that declare
        no price: each generation its writes go to (``store.state.generations.routing.writing``). None when the
        settings do not declare the collection: they are not the workers', and cannot tell (as
        ``refusals.declared``)."""
        from store.state.generations.routing import writing

        if parse_name(collection)[0] not in self.settings.collections:
            return []
        return unpriced_models(self.settings, writing(self.settings, self.ledger.generations, collection))

    def migrate(self, collection: str, chain: Sequence[str], *, batch: bool = False) -> tuple[Generation, str]:
        """Build ``collection`` under ``chain`` in a new generation and return it with its run id at once.

        Searches keep reading the live generation and updates go to both; when the run is done with no
        failure the collection switches to the new one in one step (``store.state.generations.routing``).
        Run again while it builds, it starts another run of the same generation. ``batch``: its embeddings bought
        through the batch lane. Raises ConfigError.
        """
        from store.state.generations.migration import begin

        collection = check_collection_name(collection)
        generation = begin(
            self.settings, self.ledger.generations, collection, list(chain), embedded_by=self.ledger.models
        )
        if batch:
            self._checked_lane(generation.physical)
        run_id = self.ledger.create_run(generation.physical, kind="migrate")
        if batch:
            self.ledger.set_lane(run_id, "batch")
        self.ledger.generations.set_run(collection, generation.number, run_id)
        self._send_run(REINDEX_ALL, (generation.physical, False, run_id, False), run_id)
        if batch:
            self._send(LANE_TICK, (run_id,), BULK_QUEUE)
        return generation, run_id

    def switch(self, collection: str) -> Generation:
        """Switch ``collection`` to the generation it builds now, whose run is done, failures or not
        (``vectorsync migrate --switch``). Raises ConfigError naming the fix when nothing is built to switch to."""
        from store.state.generations.routing import switch_now

        collection = check_collection_name(collection)
        registry = self.ledger.generations
        alias = registry.alias(collection)
        building = alias.building if alias is not None else None
        run = self.ledger.run(building.run_id) if building is not None and building.run_id else None
        return switch_now(registry, collection, run)

    def reconcile(self, collection: str) -> str:
        """Start a reconcile sweep (what beat runs periodically) and return its run id: of a pushed collection,
        it sends again the pushes no worker took (``store.broker.pushes``). Raises ConfigError for a collection
        the settings do not declare."""
        collection = declared(self.settings, collection)
        run_id = self.ledger.create_run(collection, kind="reconcile")
        self.ledger.set_lane(run_id, self.settings.collections[parse_name(collection)[0]].lane)
        self._send_run(RECONCILE, (collection, run_id), run_id)
        return run_id

    def _send(self, task: str, args: tuple[Any, ...], queue: str, *, changed_at: float | None = None) -> None:
        """Send ``task`` by name, stamped with when it was sent (``vectorsync status`` shows queue ages) and, for
        a captured change, when it was written (the worker measures freshness from them)."""
        self.send(task, args=args, queue=queue, headers=sent_headers(changed_at))

    def _send_run(self, task: str, args: tuple[Any, ...], run_id: str) -> None:
        """Send the task of a run just written to the ledger; when the broker does not take it, the run ends
        failed saying so (else it stayed ``running`` with no task behind it: a relay whose broker was down left
        one per attempt), and the error goes on to the caller."""
        try:
            self._send(task, args, BULK_QUEUE)
        except Exception as exc:
            try:
                self.ledger.fail_run(run_id, f"its task could not be sent ({type(exc).__name__}: {exc})")
            except Exception:  # the state database is down too: a sweep closes it as lost later
                log.warning("run %s was not sent and could not be ended: %s", run_id, exc)
            raise

    def workers(self, *, timeout: float = 1.0, active: bool = True) -> list[WorkerState]:
        """The workers that answer a broadcast within ``timeout`` seconds, with their queues (and, unless
        ``active`` is False, how many tasks each is running)."""
        return worker_states(self.app, timeout=timeout, active=active)

    def queues(self, workers: Sequence[WorkerState] = ()) -> list[QueueState]:
        """Depth, oldest message age and consumers (among ``workers``) of vectorsync's queues."""
        return queue_states(self.settings.broker.url, QUEUES, workers)

    def reindex_status(self, run_id: str) -> RunProgress:
        """A run's status (running, done, failed) and its total, done, skipped and failed counts."""
        return self.ledger.run(run_id)

    def close(self) -> None:
        self.coalescer.close()
        self.clock.close()
        self.pushes.close()
        if self._ledger is not None and self._owns_ledger:
            self._ledger.close()
        self.app.close()
