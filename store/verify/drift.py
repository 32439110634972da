"""What ``verify`` finds wrong with one record, and the report of a collection: pure values and one pure rule,
``compare``, so each kind of drift is tested alone.

A record drifts when the store does not hold what its ledger entry says was written: its chunks (``missing``),
their ids and number (``count``), their texts (``text``: compared with what the source's record makes, when its
content is still the ledger's), their vectors' size (``vector``) or their model (``model``); chunks no entry
accounts for are ``orphan``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from store.state.ledger.base import LedgerEntry
from store.vectors.records import ChunkDigest

__all__ = ["Expected", "Kind", "RecordDrift", "Repair", "Report", "compare"]


class Kind(StrEnum):
    """What differs between a record's ledger entry and its stored chunks."""

    MISSING = "missing"
    COUNT = "count"
    TEXT = "text"
    VECTOR = "vector"
    MODEL = "model"
    ORPHAN = "orphan"


@dataclass(frozen=True, slots=True)
class Expected:
    """A record as its source holds it now, read as a worker reads it: the content hash a worker would give it
    and the sha256 of each chunk's text it makes (``found`` False: gone from the source; None: not read)."""

    found: bool | None
    content_hash: str | None = None
    text_hashes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RecordDrift:
    """One drifted record: each kind found, and a line per difference."""

    record_id: str
    kinds: tuple[Kind, ...]
    details: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Repair:
    """What ``verify --repair`` did: records forgotten by the ledger and sent again as ``index_batch`` tasks,
    record ids of orphan chunks sent (their batch deletes what the source no longer has and indexes the rest),
    the statistics terms a recount changed, and what it left alone."""

    reindexed: int = 0
    orphans_sent: int = 0
    batches: int = 0
    recounted: int = 0
    left: tuple[str, ...] = ()


@dataclass
class Report:
    """What ``verify`` compared in one collection and what drifted; ``first`` holds the first drifted records
    (at most ``SHOWN``), the counts all of them."""

    collection: str
    generation: str
    backend: str
    sample: int | None = None
    #: Where its chunks are (``store.explain.gather.place_of``): the pgvector table, the Qdrant collection.
    place: str = ""
    records: int = 0
    chunks: int = 0
    drifted: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    orphan_records: int = 0
    orphan_chunks: int = 0
    keyword_terms: int = 0
    stale: int = 0
    first: list[RecordDrift] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    repair: Repair | None = None
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        """Nothing drifted: every record as its ledger entry says, no orphan chunk, statistics as a recount."""
        return not (self.drifted or self.orphan_records or self.keyword_terms)


def compare(
    record_id: str,
    entry: LedgerEntry | None,
    chunks: Sequence[ChunkDigest],
    *,
    dimensions: int,
    expected: Expected | None = None,
) -> RecordDrift | None:
    """How ``chunks`` (the store's, of ``record_id``) differ from ``entry`` (the ledger's); None when they agree.
    ``expected`` (the source's record now) adds the texts, compared only while its content is the ledger's."""
    if entry is None or not entry.content_hash:
        return _orphan(record_id, entry, chunks)
    found: list[tuple[Kind, str]] = []
    if not chunks and entry.chunks:
        found.append((Kind.MISSING, f"the ledger records {entry.chunks} chunks, the store holds none"))
    elif chunks or entry.chunks:
        found += _ids(record_id, entry.chunks, chunks)
        found += _vectors(chunks, entry, dimensions)
        if expected is not None and expected.found and expected.content_hash == entry.content_hash:
            found += _texts(record_id, chunks, expected.text_hashes)
    if not found:
        return None
    kinds = tuple(dict.fromkeys(kind for kind, _ in found))
    return RecordDrift(record_id, kinds, tuple(line for _, line in found))


def _orphan(record_id: str, entry: LedgerEntry | None, chunks: Sequence[ChunkDigest]) -> RecordDrift | None:
    if not chunks:
        return None
    why = "no ledger entry accounts for them" if entry is None else "the ledger records the record as deleted"
    return RecordDrift(record_id, (Kind.ORPHAN,), (f"{len(chunks)} chunks stored; {why}",))


def _ids(record_id: str, count: int, chunks: Sequence[ChunkDigest]) -> list[tuple[Kind, str]]:
    wanted = [f"{record_id}:{i}" for i in range(count)]
    held = [c.id for c in chunks]
    if held == wanted:
        return []
    lost = [i for i in wanted if i not in set(held)]
    extra = [i for i in held if i not in set(wanted)]
    line = f"the ledger records {count} chunks, the store holds {len(held)}"
    if lost:
        line += f"; missing {_few(lost)}"
    if extra:
        line += f"; not the ledger's {_few(extra)}"
    return [(Kind.COUNT, line)]


def _vectors(chunks: Sequence[ChunkDigest], entry: LedgerEntry, dimensions: int) -> list[tuple[Kind, str]]:
    found: list[tuple[Kind, str]] = []
    sized = [c.id for c in chunks if c.dimensions is not None and c.dimensions != dimensions]
    if sized:
        found.append((Kind.VECTOR, f"vectors not of {dimensions} dimensions: {_few(sized)}"))
    models = set(entry.model.split(","))
    other = [c.id for c in chunks if c.model not in models]
    if other:
        found.append((Kind.MODEL, f"embedded by another model than the ledger's {entry.model!r}: {_few(other)}"))
    return found


def _texts(record_id: str, chunks: Sequence[ChunkDigest], text_hashes: Sequence[str]) -> list[tuple[Kind, str]]:
    made = {f"{record_id}:{i}": digest for i, digest in enumerate(text_hashes)}
    off = [c.id for c in chunks if c.id in made and made[c.id] != c.text_hash]
    if not off:
        return []
    return [(Kind.TEXT, f"text not what the source's record makes: {_few(off)}")]


def _few(ids: Sequence[str], shown: int = 3) -> str:
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return ", ".join(ids[:shown]) + more
