"""What a batch of the pipeline is made of: pushed documents, each record's plan, the batch's result (and one where
every record failed alike), where a batch leaves its leftovers, and the content hash that decides whether a record
changed."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from store.errors import ConfigError
from store.state.ledger import Held
from store.vectors.records import canonical_json, check_record_id, clean_text
from worker.pipeline.chunker import Chunker
from worker.sources.base import SourceRecord

__all__ = [
    "BatchResult",
    "Document",
    "Judge",
    "Leftovers",
    "Planned",
    "WriteCheck",
    "as_failed",
    "as_retry",
    "content_hash",
    "failure",
    "storable",
]


@dataclass(frozen=True, slots=True)
class Document:
    """A record pushed with its content; ``version`` orders pushes of the same id (newest wins)."""

    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    version: int = 0


class Leftovers(Protocol):
    """Where a batch leaves the records of a partly filled last provider call, and takes others' to fill its
    own (``worker.pipeline.leftovers.RunPool``: a run's pool in Redis)."""

    def claim(self, texts: int) -> dict[str, int]:
        """Records (id -> texts still to embed) whose texts reach ``texts``, now the caller's to index; {} when
        there are too few. Raises StoreUnavailable."""
        ...

    def defer(self, pending: Mapping[str, int]) -> None:
        """Leave these records (id -> texts still to embed) to a later batch. Raises StoreUnavailable."""
        ...


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
    #: Records left to a later batch of the run (``Leftovers``), which writes them: done, for this batch.
    deferred: list[str] = field(default_factory=list)
    #: Records taken from the run's pool (``Leftovers.claim``) and indexed here, among the others: the batches
    #: whose ids hold them count them (``owned``).
    claimed: list[str] = field(default_factory=list)
    #: A batch-lane run's batch whose texts were queued for the provider's batch endpoint: nothing written, it
    #: waits to be sent again once they are answered (``Indexer.index``).
    waiting: bool = False

    def add(self, more: BatchResult) -> None:
        """Take in the result of another part of the same batch."""
        for name in ("indexed", "skipped", "deleted", "superseded", "deferred", "claimed"):
            getattr(self, name).extend(getattr(more, name))
        self.waiting = self.waiting or more.waiting
        self.failed.update(more.failed)
        self.retry.update(more.retry)
        self.retry_after, self.chunks = max(self.retry_after, more.retry_after), self.chunks + more.chunks

    @property
    def done(self) -> int:
        """Records whose index now follows the source (written, deleted, or left to a newer task), or will once
        a later batch of the run writes them (deferred)."""
        return len(self.indexed) + len(self.deleted) + len(self.superseded) + len(self.deferred)

    def owned(self) -> tuple[BatchResult, BatchResult]:
        """This result split in two: the batch's own records, and those it claimed, which their own batches
        count (of these, the failed and the ones to retry go back to the pool, for the pool batch)."""
        if not self.claimed:
            return self, BatchResult()
        claimed = set(self.claimed)
        own, theirs = BatchResult(retry_after=self.retry_after, chunks=self.chunks), BatchResult()
        for name in ("indexed", "skipped", "deleted", "superseded", "deferred"):
            for record_id in getattr(self, name):
                getattr(theirs if record_id in claimed else own, name).append(record_id)
        for name in ("failed", "retry"):
            for record_id, error in getattr(self, name).items():
                getattr(theirs if record_id in claimed else own, name)[record_id] = error
        return own, theirs


def as_retry(ids: Iterable[str], error: BaseException) -> BatchResult:
    """Every record of the batch hit an error that retrying can fix (the store was unavailable)."""
    return BatchResult(retry={i: f"{type(error).__name__}: {error}" for i in ids})


def as_failed(ids: Iterable[str], error: BaseException) -> BatchResult:
    """Every record of the batch hit an error that retrying cannot fix."""
    return BatchResult(failed={i: f"{type(error).__name__}: {error}" for i in ids})


@dataclass(frozen=True, slots=True)
class Planned:
    """A record to embed: as it will be stored, its content hash, its chunks' texts, its pushed version, and
    the record as the source gave it (``read``: a later read equal to it hashes the same, without hashing)."""

    record: SourceRecord
    hash: str
    texts: list[str]
    version: int = 0
    read: SourceRecord | None = None


def storable(ids: list[str], result: BatchResult, *, max_chars: int) -> list[str]:
    """The ids that can be stored (``check_record_id``); each other one fails alone in ``result``, before any
    query sees it (PostgreSQL refuses a NUL in a parameter, and a lone surrogate cannot be encoded)."""
    kept = []
    for record_id in ids:
        try:
            kept.append(check_record_id(record_id, max_chars=max_chars))
        except ConfigError as exc:
            result.failed[record_id] = failure(record_id, exc)
    return kept


def failure(record_id: str, exc: BaseException, *, fix: str = "") -> str:
    """The failures-table text of a record that failed alone: the error, and the fix when it is not in it."""
    text = f"{type(exc).__name__}: {exc}"
    if fix and not isinstance(exc, ConfigError):
        text += f" ({fix})"
    return text


def content_hash(record: SourceRecord, *, chunker: Chunker, model: str, dimensions: int) -> str:
    """sha256 of everything that shapes a record's chunks: text, metadata, chunker, model.

    ``record.metadata`` must be JSON-plain, as ``validate_metadata`` returns it.
    """
    payload = {
        "text": clean_text(record.text),
        "metadata": record.metadata,
        "chunker": chunker.describe(),
        "model": model,
        "dimensions": dimensions,
    }
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


#: Given the ids being written and their held locks, which embedded records are still to be stored.
Judge = Callable[[Sequence[str], Held], Callable[[Planned], bool]]


@dataclass(frozen=True, slots=True)
class WriteCheck:
    """How a write decides, under the records' locks, that what it embedded is still what it should store;
    ``reads_ledger``: the judge reads the ledger's rows, which then come back with the locks, in one round trip."""

    judge: Judge
    reads_ledger: bool = False
