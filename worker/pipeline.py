"""The indexing pipeline for a batch of records: load → skip unchanged → chunk → embed → swap.

No transaction or lock is held while a provider is called. Writes take the
records' locks, re-read the source and drop any result computed from a state
that has changed since (the task enqueued for that change writes it), so
concurrent tasks never leave stale or duplicate chunks.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from store.collection import Collection
from store.embeddings import Embedding, Embeddings
from store.errors import ConfigError, EmbeddingError, InputError
from store.filters import Filter
from store.records import VectorRecord, canonical_json, clean_text, validate_metadata
from store.state import LedgerEntry, State
from worker.chunking import Chunker
from worker.metrics import stage
from worker.sources.base import Source, SourceRecord

__all__ = ["BatchResult", "Document", "Indexer", "content_hash"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Document:
    """A record pushed with its content; ``version`` orders pushes of the same id (newest wins)."""

    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    version: int = 0


@dataclass(slots=True)
class BatchResult:
    """What happened to each record of a batch."""

    indexed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    retry: dict[str, str] = field(default_factory=dict)
    #: Seconds before a retry can succeed (a provider's Retry-After, or the chain's cool-down).
    retry_after: float = 0.0
    chunks: int = 0

    @property
    def done(self) -> int:
        """Records whose index now follows the source (written, deleted, or left to a newer task)."""
        return len(self.indexed) + len(self.deleted) + len(self.superseded)


@dataclass(frozen=True, slots=True)
class _Planned:
    record: SourceRecord
    hash: str
    texts: list[str]
    version: int = 0


def content_hash(record: SourceRecord, *, chunker: Chunker, model: str, dimensions: int) -> str:
    """sha256 of everything that shapes a record's chunks: text, metadata, chunker, model.

    ``record.metadata`` must be JSON-plain, as ``validate_metadata`` returns it.
    """
    payload = {"text": clean_text(record.text), "metadata": record.metadata, "chunker": chunker.describe(),
               "model": model, "dimensions": dimensions}
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


class Indexer:
    """Keeps one collection's chunks equal to its source, a batch of record ids at a time."""

    def __init__(self, *, name: str, collection: Collection, source: Source | None, chunker: Chunker,
                 embeddings: Embeddings, state: State) -> None:
        self.name = name
        self.collection = collection
        self.source = source
        self.chunker = chunker
        self.embeddings = embeddings
        self.state = state

    # -- entry points ---------------------------------------------------------------

    def index(self, ids: Sequence[str]) -> BatchResult:
        """Bring the chunks of ``ids`` in line with the source's current state."""
        source = self.require_source()
        ids = list(dict.fromkeys(str(i) for i in ids))
        result = BatchResult()
        with stage("load"):
            current = source.fetch(ids)
            self._delete_gone([i for i in ids if i not in current], result)
            planned = self._plan(list(current.values()), result)
        with stage("embed"):
            ready = self._embed(planned, result)
        with stage("write"):
            self._swap(ready, result)
        return result

    def index_documents(self, documents: Sequence[Document]) -> BatchResult:
        """Index pushed documents; an older push of an id than the one indexed is dropped."""
        newest: dict[str, Document] = {}
        for doc in documents:
            if doc.id not in newest or doc.version >= newest[doc.id].version:
                newest[doc.id] = doc
        result = BatchResult()
        records = [SourceRecord(d.id, d.text, dict(d.metadata)) for d in newest.values()]
        planned = self._plan(records, result, versions={d.id: d.version for d in newest.values()})
        self._swap(self._embed(planned, result), result)
        return result

    def delete_documents(self, ids: Sequence[str], *, version: int = 0) -> BatchResult:
        """Remove pushed documents, unless a newer push of them was indexed.

        The ledger keeps a tombstone (no content hash) at ``version``, so a push
        older than the delete that arrives late is dropped too.
        """
        result = BatchResult()
        with self.state.locked(self.name, ids) as conn:
            ledger = self.state.ledger(self.name, list(ids), conn)
            gone = [i for i in ids if i not in ledger or ledger[i].version <= version]
            if gone:
                self.collection.delete_where(Filter.any_of("record_id", gone))
                self.state.record_indexed(self.name, [LedgerEntry(i, "", "", 0, version) for i in gone], conn)
        result.deleted.extend(gone)
        result.superseded.extend(i for i in ids if i not in gone)
        return result

    def stale_ids(self, ids: Sequence[str]) -> list[str]:
        """Which of ``ids`` the index does not follow: new, changed or gone (for reconcile sweeps)."""
        current = self.require_source().fetch(ids)
        ledger = self.state.ledger(self.name, list(ids))
        return [i for i in ids if i not in current or i not in ledger or not self._current(ledger[i], current[i])]

    def _current(self, known: LedgerEntry, record: SourceRecord) -> bool:
        try:
            return self._unchanged(known, self._hash(record))
        except ConfigError:
            return False

    # -- stages ---------------------------------------------------------------------

    def require_source(self) -> Source:
        """The source records are read from; ConfigError for a collection whose records are pushed."""
        if self.source is None:
            raise ConfigError(
                f"collection {self.name!r} has no source to read records from (its records are pushed): "
                f"use index_document, or set collections.{self.name}.source.kind to 'sql' or 'python'"
            )
        return self.source

    @staticmethod
    def _clean(record: SourceRecord) -> SourceRecord:
        """The record as it will be stored: metadata a clean JSON object. Raises ConfigError."""
        return SourceRecord(record.id, record.text, validate_metadata(record.metadata, record_id=record.id))

    def _digest(self, clean: SourceRecord) -> str:
        return content_hash(clean, chunker=self.chunker, model=self.embeddings.model,
                            dimensions=self.embeddings.dimensions)

    def _hash(self, record: SourceRecord) -> str:
        """The content hash of the record as it will be stored. Raises ConfigError."""
        return self._digest(self._clean(record))

    def _delete_gone(self, gone: list[str], result: BatchResult) -> None:
        if not gone:
            return
        with self.state.locked(self.name, gone) as conn:
            still_gone = [i for i in gone if i not in self.require_source().fetch(gone)]
            if still_gone:
                self.collection.delete_where(Filter.any_of("record_id", still_gone))
                self.state.forget(self.name, still_gone, conn)
        result.deleted.extend(still_gone)
        result.superseded.extend(i for i in gone if i not in still_gone)

    def _plan(self, records: list[SourceRecord], result: BatchResult,
              versions: Mapping[str, int] | None = None) -> list[_Planned]:
        ledger = self.state.ledger(self.name, [r.id for r in records])
        planned: list[_Planned] = []
        bumps: list[LedgerEntry] = []
        for raw in records:
            try:  # one record's bad metadata fails that record, not its batch
                record = self._clean(raw)
                digest = self._digest(record)
            except ConfigError as exc:
                result.failed[raw.id] = f"ConfigError: {exc}"
                continue
            known = ledger.get(record.id)
            version = (versions or {}).get(record.id, 0)
            if known is not None and (known.version > version or self._unchanged(known, digest)):
                result.skipped.append(record.id)
                if known.version < version:  # same content pushed again: remember the newer version
                    bumps.append(LedgerEntry(known.record_id, known.content_hash, known.model, known.chunks, version))
                continue
            texts = [chunk.text for chunk in self.chunker.split(record.text)]
            planned.append(_Planned(record, digest, texts, version))
        if bumps:
            with self.state.locked(self.name, [b.record_id for b in bumps]) as conn:
                self.state.record_indexed(self.name, bumps, conn)
        return planned

    def _unchanged(self, known: LedgerEntry, digest: str) -> bool:
        # A record a fallback model embedded is not current once the chain's first model is back.
        return known.content_hash == digest and known.model == self.embeddings.model

    def _embed(self, planned: list[_Planned], result: BatchResult) -> list[tuple[_Planned, list[Embedding]]]:
        """Embed every chunk of the batch together; on failure, each record alone, so one bad record
        fails by itself."""
        if not planned:
            return []
        try:
            vectors = self.embeddings.embed_many_with_models([t for p in planned for t in p.texts])
        except EmbeddingError as exc:
            if len(planned) == 1:
                self._record_error(planned[0], exc, result)
                return []
            log.info("batch of %d records failed to embed (%s); embedding them one by one", len(planned), exc)
            return [pair for p in planned for pair in self._embed([p], result)]
        ready, start = [], 0
        for plan in planned:
            ready.append((plan, vectors[start:start + len(plan.texts)]))
            start += len(plan.texts)
        return ready

    def _record_error(self, plan: _Planned, exc: EmbeddingError, result: BatchResult) -> None:
        if isinstance(exc, InputError):
            result.failed[plan.record.id] = f"{type(exc).__name__}: {exc}"
        else:
            result.retry[plan.record.id] = f"{type(exc).__name__}: {exc}"
            result.retry_after = max(result.retry_after, getattr(exc, "retry_after", None) or 0.0)

    def _swap(self, ready: list[tuple[_Planned, list[Embedding]]], result: BatchResult) -> None:
        if not ready:
            return
        ids = [plan.record.id for plan, _ in ready]
        with self.state.locked(self.name, ids) as conn:
            now = self.source.fetch(ids) if self.source is not None else None
            ledger = self.state.ledger(self.name, ids, conn) if self.source is None else {}
            keep, records, entries = [], [], []
            for plan, embeddings in ready:
                if not self._still_current(plan, now, ledger):
                    result.superseded.append(plan.record.id)
                    continue
                keep.append(plan.record.id)
                records.extend(self._chunk_records(plan, embeddings))
                models = ",".join(sorted({e.model for e in embeddings}))
                entries.append(LedgerEntry(plan.record.id, plan.hash, models, len(embeddings), plan.version))
            if keep:
                self.collection.replace_where(Filter.any_of("record_id", keep), records)
                self.state.record_indexed(self.name, entries, conn)
        result.indexed.extend(keep)
        result.chunks += len(records)

    def _still_current(self, plan: _Planned, now: Mapping[str, SourceRecord] | None,
                       ledger: Mapping[str, LedgerEntry]) -> bool:
        if now is None:  # pushed: the newest version wins
            known = ledger.get(plan.record.id)
            return known is None or known.version <= plan.version
        fresh = now.get(plan.record.id)
        try:
            return fresh is not None and self._hash(fresh) == plan.hash
        except ConfigError:
            return False

    def _chunk_records(self, plan: _Planned, embeddings: Iterable[Embedding]) -> list[VectorRecord]:
        record = plan.record
        return [
            VectorRecord(
                id=f"{record.id}:{index}",
                embedding=embedding.vector,
                text=text,
                metadata={**record.metadata, "record_id": record.id, "chunk": index},
                model=embedding.model,
            )
            for index, (text, embedding) in enumerate(zip(plan.texts, embeddings, strict=True))
        ]
