"""The producer side: enqueue indexing tasks by name, read run progress. Never imports the worker.

App code reaches it as ``Client.producer`` (``store.client``) or through ``producer``'s functions.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, overload

from celery import Celery

from store.broker.coalescing import Coalescer
from store.broker.config import celery_config
from store.broker.documents import document_id
from store.broker.pushes import Push, Pushes
from store.broker.queues import QueueState, WorkerState, queue_states, sent_headers, worker_states
from store.broker.versions import DocumentClock
from store.calls.spend import Spent, total
from store.connect.redis import REDIS_ERRORS
from store.contract import (
    BULK_QUEUE,
    INDEX_BATCH,
    INDEX_DOCUMENT,
    INDEX_RECORD,
    LIVE_QUEUE,
    QUEUES,
    RECONCILE,
    REINDEX_ALL,
    BatchMessage,
)
from store.errors import ConfigError
from store.settings import CollectionSettings, Settings
from store.state.generations import Generation
from store.state.generations.base import generation_settings, parse_name
from store.state.ledger import Ledger, RunProgress, ledger_from_settings
from store.vectors.records import check_collection_name, check_record_id, validate_metadata

__all__ = ["MAX_TOKENS_CAP", "Producer", "Sender", "checked_caps", "checked_prices", "checked_resume_caps"]

#: Sends one task by name, called as Celery's ``send_task(name, args=..., queue=..., headers=...)`` is.
Sender = Callable[..., object]


def _record_id(record_id: object) -> str:
    if isinstance(record_id, bool) or not isinstance(record_id, str | int) or record_id == "":
        raise ConfigError(f"record id {record_id!r} is not allowed: use a non-empty string or an integer")
    return str(record_id)


#: The most tokens a cap may hold: the ledger keeps it in a bigint.
MAX_TOKENS_CAP = 2**63 - 1


def checked_caps(max_tokens: int | None, max_cost: float | None) -> None:
    """Refuse caps the ledger cannot keep or JSON cannot carry, before a run is created: a cost that is not a
    finite number of 0 or more (``inf`` was taken, and ``status --json`` then held ``Infinity``, which strict
    parsers refuse), a token count past a bigint (PostgreSQL refused it after the run was committed, leaving a
    run with no task)."""
    if max_cost is not None and not (isinstance(max_cost, int | float) and math.isfinite(max_cost) and max_cost >= 0):
        raise ConfigError(f"--max-cost {max_cost!r} is not a cost: give a finite number of 0 or more")
    if max_tokens is not None and not (isinstance(max_tokens, int) and 1 <= max_tokens <= MAX_TOKENS_CAP):
        raise ConfigError(f"--max-tokens {max_tokens!r} is not a cap: give a whole number from 1 to {MAX_TOKENS_CAP}")


#: What ``_unpriced_models`` calls the model of an empty chain, which no ``[models.NAME]`` declares.
_BUILT_IN_FAKE = "the built-in fake model (embeddings.chain is empty)"


def _unpriced_models(settings: Settings, generations: Sequence[Generation]) -> list[str]:
    """The ``[models.NAME]`` entries of the chains that embed ``generations`` that declare no price (an empty chain:
    ``_BUILT_IN_FAKE``); a cost cap cannot count their calls."""
    unpriced: dict[str, None] = {}
    for generation in generations:
        embedded = generation_settings(settings, generation)
        for name in embedded.embeddings.chain or [_BUILT_IN_FAKE]:
            model = embedded.models.get(name)
            if model is None or model.price_per_million_tokens is None:
                unpriced[name] = None
    return list(unpriced)


def checked_prices(max_cost: float | None, unpriced: Sequence[str], collection: str) -> None:
    """Refuse a cost cap on a run whose chain has a model without a declared price: its calls cost nothing against
    the cap, which then stops nothing (a run capped at 0.000001 spent 6,446 tokens)."""
    if max_cost is None or not unpriced:
        return
    one = len(unpriced) == 1
    models = f"model {unpriced[0]!r} declares" if one else f"models {', '.join(map(repr, unpriced))} declare"
    named = next((name for name in unpriced if name != _BUILT_IN_FAKE), "NAME")
    raise ConfigError(
        f"--max-cost {max_cost!r} cannot cap a run of {collection!r}: {models} no price, so calls to "
        f"{'it' if one else 'them'} would cost nothing against the cap: declare [models.{named}] "
        "price_per_million_tokens (what the provider charges for a million tokens) for each model of the chain, or "
        "cap the run with --max-tokens"
    )


def checked_resume_caps(run_id: str, spent: Spent, max_tokens: int | None, max_cost: float | None) -> None:
    """Refuse a resumed run's cap at or below what it has spent already: a cap counts the whole run's spend, so
    such a cap pauses it again at its next call (``--max-tokens 1`` on a run that spent 1,968 said "-1967 left")."""
    if max_tokens is not None and max_tokens <= spent.tokens:
        raise ConfigError(
            f"--max-tokens {max_tokens:,} is not above the {spent.tokens:,} tokens run {run_id} has spent already "
            f"(a cap counts the whole run's spend, not what is left): resume it with a cap above {spent.tokens:,}"
        )
    if max_cost is not None and spent.cost is not None and max_cost <= spent.cost:
        raise ConfigError(
            f"--max-cost {max_cost:g} is not above the {spent.cost:g} run {run_id} has spent already (a cap counts "
            f"the whole run's spend, not what is left): resume it with a cap above {spent.cost:g}"
        )


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
        collection, key = self._declared(collection, read=True), self._id(record_id)
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
        ids = [self._id(i) for i in record_ids]
        self._send(INDEX_BATCH, (self._declared(collection, read=True), ids), BULK_QUEUE, changed_at=changed_at)

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
        label = _record_id(id) if id is not None else "new document"
        config = self._require_pushed(collection)
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
        if version is None:
            return self.clock.next()
        if isinstance(version, bool) or not isinstance(version, int) or not 0 < version < 2**63:
            raise ConfigError(
                f"version {version!r} of document {label!r} is not allowed: pass a positive integer "
                "below 2**63 that grows with each send of the document (or leave it out)"
            )
        return version

    def document_id(
        self, collection: str, text: str, metadata: Mapping[str, Any] | None = None, *, id: str | int | None = None
    ) -> str:
        """The id ``index_document`` gives this document (to delete it later, say). Raises ConfigError."""
        clean = validate_metadata(metadata or {}, record_id=_record_id(id) if id is not None else "new document")
        return self._document_id(collection, text, clean, id, self.settings.collections.get(collection))

    def _document_id(
        self, collection: str, text: str, clean: Mapping[str, Any], id: object, config: CollectionSettings | None
    ) -> str:
        id_field = config.source.id_field if config is not None else None
        key = document_id(collection, text, clean, id=id, id_field=id_field)
        return check_record_id(key, max_chars=self.settings.limits.max_id_chars)

    def delete_document(self, collection: str, id: str | int, *, version: int | None = None) -> None:
        """Enqueue the removal of a pushed document; ``version`` as ``index_document``'s."""
        self._require_pushed(collection)
        key = self._id(id)
        self.send_push(check_collection_name(collection), Push(key, None, {}, self._version(version, key), time.time()))

    def reindex_all(
        self,
        collection: str,
        *,
        full: bool = False,
        allow_empty: bool = False,
        max_tokens: int | None = None,
        max_cost: float | None = None,
    ) -> str:
        """Start a reindex of the whole collection and return its run id at once; ``max_tokens``/``max_cost``:
        its caps (None: the collection's ``[collections.NAME.budget]``), past which it pauses. Raises ConfigError
        for a collection the settings do not declare, or whose records are pushed (there is no source to read)."""
        collection = self._declared(collection, read=True)
        checked_caps(max_tokens, max_cost)
        if max_cost is not None:
            checked_prices(max_cost, self._unpriced(collection), collection)
        run_id = self.ledger.create_run(collection, full=full)
        if max_tokens is not None or max_cost is not None:
            self.ledger.set_caps(run_id, max_tokens=max_tokens, max_cost=max_cost)
        self._send_run(REINDEX_ALL, (collection, full, run_id, allow_empty), run_id)
        return run_id

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
        settings do not declare the collection: they are not the workers', and cannot tell (as ``_declared``)."""
        from store.state.generations.routing import writing

        if parse_name(collection)[0] not in self.settings.collections:
            return []
        return _unpriced_models(self.settings, writing(self.settings, self.ledger.generations, collection))

    def migrate(self, collection: str, chain: Sequence[str]) -> tuple[Generation, str]:
        """Build ``collection`` under ``chain`` in a new generation and return it with its run id at once.

        Searches keep reading the live generation and updates go to both; when the run is done with no
        failure the collection switches to the new one in one step (``store.state.generations.routing``).
        Run again while it builds, it starts another run of the same generation. Raises ConfigError.
        """
        from store.state.generations.migration import begin

        collection = check_collection_name(collection)
        generation = begin(
            self.settings, self.ledger.generations, collection, list(chain), embedded_by=self.ledger.models
        )
        run_id = self.ledger.create_run(generation.physical, kind="migrate")
        self.ledger.generations.set_run(collection, generation.number, run_id)
        self._send_run(REINDEX_ALL, (generation.physical, False, run_id, False), run_id)
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
        collection = self._declared(collection)
        run_id = self.ledger.create_run(collection, kind="reconcile")
        self._send_run(RECONCILE, (collection, run_id), run_id)
        return run_id

    def _id(self, record_id: object) -> str:
        return check_record_id(_record_id(record_id), max_chars=self.settings.limits.max_id_chars)

    def _declared(self, collection: str, *, read: bool = False) -> str:
        """``collection``, checked against the settings when they declare any collection (a producer whose
        settings declare none cannot tell, and sends). ``read``: it must have a source to read."""
        collection = check_collection_name(collection)
        declared = self.settings.collections
        if declared and collection not in declared:
            raise ConfigError(
                f"collection {collection!r} is not declared in the settings (declared: "
                f"{', '.join(sorted(declared))}): check the name, or add [collections.{collection}]"
            )
        if read and collection in declared and declared[collection].source.kind == "push":
            raise ConfigError(
                f"collection {collection!r} has its records pushed (source.kind = 'push'): there is "
                "no source to read, so nothing to index by id or reindex; push the "
                "documents again (index_document)"
            )
        return collection

    def _require_pushed(self, collection: str) -> CollectionSettings | None:
        """The collection's settings, if any. A collection the settings give a source reads its records there:
        pushing to it is a mistake; one the settings do not declare too, when they declare any (``_declared``)."""
        config = self.settings.collections.get(self._declared(collection))
        if config is not None and config.source.kind != "push":
            raise ConfigError(
                f"collection {collection!r} reads its records from its {config.source.kind} source; "
                "index_document and delete_document are for collections whose records are pushed "
                f"(collections.{collection}.source.kind = 'push'): use index_record for this one"
            )
        return config

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
