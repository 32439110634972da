"""The facts ``explain`` judges, read from each part through its own seam: the source (through a
``SourceReader``), the ledger's entry and failures, the chunks the store holds, the capture outbox and the
coalescing mark. A part that cannot be read leaves its fact unknown and a note that says why; only bad input
raises."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from store.errors import ConfigError, VectorsyncError
from store.explain.facts import Facts, SourceFacts
from store.state.generations.base import parse_name
from store.vectors.filters import Filter
from store.vectors.records import check_record_id
from store.vectors.tenancy import check_scoped

if TYPE_CHECKING:
    from store.broker.producer import Producer
    from store.settings import CollectionSettings, Settings
    from store.state.generations.routing import Router
    from store.state.ledger import Failure, Ledger
    from store.vectors.base import Collection

__all__ = ["Parts", "SourceReader", "backend_of", "declared", "gather", "no_source", "place_of"]

#: The backends, as ``vectors.store`` names them.
BACKENDS = ("pgvector", "qdrant", "memory")
#: The stores that keep no write time of a chunk.
NO_WRITE_TIME = ("memory", "qdrant")


class SourceReader(Protocol):
    """Reads one record as a worker would: its row and the content hash a worker would give it now
    (``worker.repair.source_reading.SourceReading`` is the worker's)."""

    def read(self, collection: str, record_id: str) -> SourceFacts:
        """The record in its source; a read that fails is a ``SourceFacts`` with ``found`` None and a note."""
        ...


class Parts(Protocol):
    """What ``gather`` reads from: a ``store.Client`` is one."""

    settings: Settings

    @property
    def router(self) -> Router: ...

    @property
    def ledger(self) -> Ledger: ...

    @property
    def producer(self) -> Producer: ...


def declared(settings: Settings, collection: str) -> CollectionSettings:
    """The settings of ``collection`` (or of the collection a generation's name ``NAME__gN`` belongs to).
    Raises ConfigError naming the configured ones."""
    config = settings.collections.get(parse_name(collection)[0])
    if config is None:
        known = ", ".join(sorted(settings.collections)) or "none"
        raise ConfigError(
            f"collection {collection!r} is not configured (configured: {known}): check the name, or add "
            f"[collections.{collection}] to the settings"
        )
    return config


def no_source(kind: str) -> SourceFacts:
    """The source facts when no reader was given: pushed records have nothing to read in any case."""
    if kind == "push":
        return SourceFacts(kind, None, note="its records are pushed: the app holds their content")
    return SourceFacts(kind, None, note="the source was not read (no source reader was given)")


def gather(
    parts: Parts,
    collection: str,
    record_id: str,
    *,
    source: SourceReader | None = None,
    filter: Filter | None = None,
) -> Facts:
    """Everything known of ``record_id`` in ``collection``. A collection with a required filter is explained only
    within ``filter``, which must pin it as a search's does: a record outside it is told as unknown, its text
    and metadata unread. Raises ConfigError for an unknown collection, a record id no store could hold, or a
    filter that does not pin the required fields."""
    settings = parts.settings
    config = declared(settings, collection)
    record_id = check_record_id(str(record_id), max_chars=settings.limits.max_id_chars)
    kind = config.source.kind
    base = parse_name(collection)[0]
    stored = parts.router.read(collection)
    check_scoped(stored.name, stored.required_filter, filter)
    if stored.required_filter and filter is not None and not _within(stored, record_id, filter, source):
        return _outside(collection, record_id, parts.router.reading(collection).physical, stored, kind)
    read = source.read(collection, record_id) if source is not None and kind != "push" else no_source(kind)
    generation = parts.router.reading(collection).physical
    chunks, backend = stored.chunks_of(record_id), backend_of(stored)
    notes = _notes(backend, read)
    rows, since = _outbox(settings, config, base, record_id, notes)
    queued = parts.producer.coalescer.queued(base, record_id)
    if queued is None:
        notes.append("queued mark: cannot tell (coalescing is off, or Redis did not answer)")
    return Facts(
        collection=collection,
        record_id=record_id,
        generation=generation,
        backend=backend,
        place=place_of(stored),
        source=read,
        entry=parts.ledger.entries(generation, [record_id]).get(record_id),
        chunks=chunks,
        failure=_failure(parts.ledger, generation, record_id),
        outbox_rows=rows,
        outbox_since=since,
        queued=queued,
        notes=notes,
    )


def _within(stored: Collection, record_id: str, filter: Filter, source: SourceReader | None) -> bool:
    """Whether the record is inside ``filter``: a stored chunk of it matches, or its source row's metadata does."""
    if stored.count(filter & Filter.eq("record_id", record_id)) > 0:
        return True
    if source is None:
        return False
    read = source.read(stored.name, record_id)
    return bool(read.found) and filter.matches({**read.metadata, "record_id": record_id})


def _outside(collection: str, record_id: str, generation: str, stored: Collection, kind: str) -> Facts:
    """The facts of a record outside the caller's filter: nothing of it is read or shown."""
    note = "not read: the record is not within the filter (each tenant's records are explained apart)"
    return Facts(
        collection=collection,
        record_id=record_id,
        generation=generation,
        backend=backend_of(stored),
        place=place_of(stored),
        source=SourceFacts(kind, None, note=note),
        entry=None,
        chunks=[],
        failure=None,
        outbox_rows=None,
        outbox_since=None,
        queued=None,
        notes=[note],
    )


def backend_of(collection: Collection) -> str:
    """Which backend holds ``collection``, by the module of its class (a store passed to the Client may differ
    from ``vectors.store``)."""
    module = type(collection).__module__
    return next((name for name in BACKENDS if f".{name}" in module), type(collection).__name__)


def place_of(collection: Collection) -> str:
    """Where ``collection``'s chunks are, as an operator finds them: ``the pgvector table vs_notes``, ``the qdrant
    collection notes``."""
    return f"the {backend_of(collection)} {collection.place}"


def _notes(backend: str, read: SourceFacts) -> list[str]:
    notes = ["the ledger records when a record was written, not which run or task wrote it"]
    if backend in NO_WRITE_TIME:
        notes.append(f"the {backend} store keeps no write time of a chunk")
    if read.note:
        notes.append(f"source: {read.note}")
    notes.append(
        "a task already in the broker's queue is not looked for there (change capture sends without a queued mark)"
    )
    return notes


def _failure(ledger: Ledger, generation: str, record_id: str) -> Failure | None:
    return next((f for f in ledger.failures(generation) if f.record_id == record_id), None)


def _outbox(
    settings: Settings, config: CollectionSettings, collection: str, record_id: str, notes: list[str]
) -> tuple[int | None, datetime | None]:
    """The outbox rows waiting for the record and the oldest's time; (None, None) without capture."""
    if config.source.capture != "trigger" or not config.source.url:
        return None, None
    from store.capture.outbox import Outbox

    outbox = Outbox(config.source.url, network=settings.network)
    try:
        waiting = outbox.waiting(collection, record_id)
    except VectorsyncError as exc:
        notes.append(f"capture outbox: could not be read ({exc})")
        return None, None
    finally:
        outbox.close()
    return waiting.rows, waiting.since
