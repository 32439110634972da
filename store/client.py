"""The app-facing client: one object, built from the settings, that holds what app code and the CLI use.

    from store import Client
    with Client.from_settings() as client:
        client.producer.index_record("notes", 42)
        client.search("notes", "onboarding delays", filter={"kind": "call"}, limit=5)
        client.answer("notes", "Why is Dana's onboarding late?")
        client.collections.reset("notes")

It holds the vector store and the embeddings, the generations (a search reads
a collection's live generation), retrieval (rerank, answer), the collections'
lifecycle and the producer (enqueue, runs). Each part is built on first use,
so a client that only enqueues loads no embedding client, numpy or SQLAlchemy,
and ``close()`` (or the ``with`` block) releases what was built.

``store.query``'s functions and ``producer``'s are helpers over one default
client per process (``store.process.defaults``), as ``httpx.get`` is over a Client.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, Unpack, cast

from store.errors import VectorsyncError
from store.settings import Settings, load_settings

if TYPE_CHECKING:
    from store.broker.producer import Producer, Sender
    from store.embeddings import Embeddings
    from store.explain import Facts, SourceReader
    from store.lifecycle import Collections
    from store.plan import Plan, PlanReader
    from store.retrieval import GroundedAnswer, Retrieval
    from store.retrieval.matches import Matches
    from store.retrieval.options import AnswerOptions, SearchOptions
    from store.retrieval.twins import Pending
    from store.state.generations import Generations
    from store.state.generations.routing import Router
    from store.state.ledger import Ledger
    from store.vectors.base import Collection, VectorStore
    from store.vectors.filters import Filter
    from store.vectors.records import VectorMatch
    from store.verify import ChunkReader, Report

__all__ = ["Client", "Hooks"]

T = TypeVar("T")


@dataclass(frozen=True)
class Hooks:
    """What a client calls back: ``send`` sends its producer's tasks (None: through the broker), and
    ``on_embeddings`` is given each Embeddings it builds (the worker watches their stats)."""

    send: Sender | None = None
    on_embeddings: Callable[[Embeddings], Any] | None = None


class Client:
    """What app code and the CLI use, over one set of settings; see the module docstring.

    Parts passed in are used as they are and left to the caller to close (a test's memory store, the
    worker's own ledger); the rest are built on first use and closed by ``close()``.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        store: VectorStore | None = None,
        embeddings: Embeddings | None = None,
        ledger: Ledger | None = None,
        retrieval: Retrieval | None = None,
        hooks: Hooks = Hooks(),
    ) -> None:
        self.settings = settings
        self._given = {
            name
            for name, part in (
                ("store", store),
                ("embeddings", embeddings),
                ("ledger", ledger),
                ("retrieval", retrieval),
            )
            if part is not None
        }
        self._parts: dict[str, Any] = {
            "store": store,
            "embeddings": embeddings,
            "ledger": ledger,
            "retrieval": retrieval,
        }
        self._send = hooks.send
        self._on_embeddings = hooks.on_embeddings
        #: One lock per part, so a slow build (a local model, a state database upgrading) holds up only the
        #: callers of that part; ``_lock`` guards the table of them and ``close``.
        self._building: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> Client:
        """A client over ``settings`` (default: ``load_settings()``). Raises ConfigError for bad settings."""
        return cls(settings if settings is not None else load_settings())

    # -- the parts, built on first use -------------------------------------------------

    def _part(self, name: str, build: Callable[[], T]) -> T:
        part = self._parts.get(name)
        if part is not None:
            return cast(T, part)
        with self._lock:
            if self._closed:
                raise VectorsyncError(
                    f"this Client is closed: its {name} is gone; build another client (Client.from_settings()) to go on"
                )
            lock = self._building.setdefault(name, threading.Lock())
        with lock:
            if self._parts.get(name) is None:
                self._parts[name] = build()
            return cast(T, self._parts[name])

    @property
    def embeddings(self) -> Embeddings:
        """The cache and failover chain that embed texts (``[embeddings]``, ``[models]``)."""

        def build() -> Embeddings:
            from store.embeddings import Embeddings

            built = Embeddings.from_settings(self.settings)
            if self._on_embeddings is not None:
                self._on_embeddings(built)
            return built

        return self._part("embeddings", build)

    @property
    def store(self) -> VectorStore:
        """The ``[vectors]`` store; text queries are embedded by ``embeddings``, built at the first one."""

        def build() -> VectorStore:
            from store.vectors.backends import open_store

            return open_store(self.settings, embedder=_Deferred(lambda: self.embeddings))

        return self._part("store", build)

    @property
    def ledger(self) -> Ledger:
        """Indexing state in the state database; in memory for a memory store without one (it keeps nothing
        past its process either). Raises ConfigError, StoreUnavailable."""

        def build() -> Ledger:
            from store.state.ledger import ledger_from_settings

            return ledger_from_settings(self.settings, memory_fallback=True)

        return self._part("ledger", build)

    @property
    def generations(self) -> Generations | None:
        """The registry of migrated collections; None with no state database (every name is its own)."""
        if "ledger" not in self._given and self.settings.state_url is None:
            return None
        return self.ledger.generations

    @property
    def router(self) -> Router:
        """Where a read and a write of each name go (``store.state.generations.routing``)."""

        def build() -> Router:
            from store.state.generations.routing import Router

            # No embeddings of its own: a vector query needs no model, and the store embeds a text query
            # through ``embeddings`` when one comes (the worker takes ``embeddings`` itself).
            return Router(self.settings, store=self.store, registry=self.generations, on_embeddings=self._on_embeddings)

        return self._part("router", build)

    @property
    def retrieval(self) -> Retrieval:
        """Rerank and answer (``[retrieval]``), reading each collection's live generation as search does."""

        def build() -> Retrieval:
            from store.retrieval import Retrieval

            built = Retrieval.from_settings(self.settings, store=self.store)
            built.opener = lambda name, _declared: self.get_collection(name)
            return built

        return self._part("retrieval", build)

    @property
    def collections(self) -> Collections:
        """The collections' lifecycle: create, reset, drop, with their ledger state."""

        def build() -> Collections:
            from store.lifecycle import Collections

            return Collections(
                self.store, self.ledger, declared=sorted(self.settings.collections), settings=self.settings
            )

        return self._part("collections", build)

    @property
    def producer(self) -> Producer:
        """Sends tasks by name through the broker (``[broker]``) and reads runs from the ledger."""

        def build() -> Producer:
            from store.broker.producer import Producer
            from store.state.ledger import in_process_only

            given = self._parts["ledger"] if "ledger" in self._given else None
            # Runs sent to a broker need the state database workers share: a memory ledger would be this
            # process's alone, so an in-process client's producer finds none, as a Producer does.
            shared = given is None and not in_process_only(self.settings)
            return Producer(
                self.settings, send=self._send, ledger=given, open_ledger=(lambda: self.ledger) if shared else None
            )

        return self._part("producer", build)

    # -- reads ---------------------------------------------------------------------------

    def get_collection(self, name: str) -> Collection:
        """The collection a search of ``name`` reads: its live generation's (``NAME__gN``: that one). A declared
        collection is created empty; a name that is neither declared nor stored is a ConfigError."""
        return self.router.read(name)

    def search(self, collection: str, query: str | Sequence[float], **options: Unpack[SearchOptions]) -> Matches:
        """The ``limit`` best matches for a text or vector ``query`` in ``collection``'s live generation; ``options``
        as ``store.query.search``'s (``SearchOptions``). Raises ConfigError, StoreUnavailable, EmbeddingError."""
        from store.retrieval.options import SearchOptions, refuse_unknown
        from store.retrieval.search import searched

        refuse_unknown("Client.search", options, SearchOptions.__optional_keys__)
        return searched(self.get_collection(collection), query, options)

    def asearch(
        self, collection: str, query: str | Sequence[float], **options: Unpack[SearchOptions]
    ) -> Pending[Matches]:
        """``search`` without blocking the event loop (it runs in a worker thread): ``await client.asearch()``."""
        from store.retrieval.options import SearchOptions, refuse_unknown
        from store.retrieval.twins import Pending

        refuse_unknown("Client.asearch", options, SearchOptions.__optional_keys__)
        return Pending(asyncio.to_thread(self.search, collection, query, **options), "asearch")

    def explain(
        self,
        collection: str,
        record_id: str | int,
        *,
        source: SourceReader | None = None,
        filter: Filter | Mapping[str, Any] | None = None,
    ) -> Facts:
        """Where one record stands: its source row, its content hash now and the ledger's, its stored chunks, its
        failure, and a change waiting (outbox row, queued mark); ``.verdict`` says what it adds up to. ``source``
        reads the record as a worker would (``worker.repair.source_reading.SourceReading(client)``); None: the source is
        not read, and the facts say so. ``filter``: a collection with a required filter is explained only within
        one that pins it (a record outside is told as unknown). Raises ConfigError for an unknown collection, a
        bad record id or filter."""
        from store.explain import gather
        from store.retrieval.search import as_filter

        return gather(self, collection, str(record_id), source=source, filter=as_filter(filter))

    def verify(
        self, collection: str, *, sample: int | None = None, source: ChunkReader | None = None, repair: bool = False
    ) -> Report:
        """Compare ``collection``'s ledger with what its store holds, record by record (every record, or ``sample``
        at random), find chunks no entry accounts for and keyword statistics a recount would change. ``source``
        reads records as a worker would, so chunk texts are compared too (``worker.repair.chunk_reading.ChunkReading``).
        ``repair``: drifted records are forgotten by the ledger and sent as ``index_batch`` tasks, orphans' ids
        sent too (their batch deletes what the source no longer has), the statistics recounted. Raises
        ConfigError for an unknown collection or a bad sample, StoreUnavailable."""
        from store.verify import verify

        return verify(self, collection, sample=sample, source=source, repair=repair)

    def plan(self, collection: str, *, reader: PlanReader, chain: Sequence[str] | None = None) -> Plan:
        """What a reindex of ``collection`` (with ``chain``: its migration to that chain) would do and cost: records
        new, changed, unchanged and gone, chunks to embed and reused, tokens, provider calls, cost and the time the
        rate limits allow. ``reader`` judges records as a worker would
        (``worker.repair.plan_reading.PlanReading(client)``). Calls no provider, writes nothing. Raises ConfigError,
        StoreUnavailable."""
        from store.plan import plan

        return plan(self.settings, self.ledger, collection, reader=reader, chain=chain)

    def rerank(
        self, query: str, matches: Sequence[VectorMatch], *, top: int | None = None, user: str | None = None
    ) -> Matches:
        """The ``top`` matches that best answer ``query``, best first, ``score`` the reranker's (0 to 1). With no
        rerank model configured the search order is kept and nothing is called. Raises ConfigError, ProviderError."""
        from store.retrieval.matches import Matches

        return Matches(self.retrieval.rerank(query, matches, top=top, user=user), called="rerank")

    def answer(self, collection: str, question: str, **options: Unpack[AnswerOptions]) -> GroundedAnswer:
        """Answer ``question`` from ``collection``'s passages that ``filter`` and ``allow`` let through, citing them;
        ``options`` as ``Retrieval.answer``'s (``AnswerOptions``). Raises ConfigError, StoreUnavailable,
        ProviderError."""
        from store.retrieval.options import AnswerOptions, refuse_unknown

        refuse_unknown("Client.answer", options, AnswerOptions.__optional_keys__)
        return self.retrieval.answer(collection, question, **options)

    # -- closing -------------------------------------------------------------------------

    def close(self) -> None:
        """Release what this client built (connections, model clients); parts passed in stay open, and stay
        the client's. A part built after this is a VectorsyncError; closing again does nothing."""
        with self._lock:
            self._closed = True
            built = {name: part for name, part in self._parts.items() if part is not None and name not in self._given}
            self._parts = {name: part for name, part in self._parts.items() if name in self._given}
        # Most dependent first: the producer and router use the ledger, the store and the embeddings.
        # (Retrieval holds the store only; the lifecycle, the store and the ledger: both closed here.)
        for name in ("producer", "router", "store", "embeddings", "ledger"):
            if name in built:
                built[name].close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Deferred:
    """A query embedder built at its first use, so a client that never embeds a text needs no model key."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build

    def embed(self, text: str) -> Sequence[float]:
        return cast("Sequence[float]", self._build().embed(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._build(), name)
