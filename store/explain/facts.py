"""What ``explain`` found about one record, and the verdict drawn from it: a pure rule, no I/O.

``gather.py`` reads the facts from each part; ``verdict(facts)`` decides where the record stands and names the
command that moves it on, so every state is tested alone on a ``Facts`` value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from store.state.ledger.base import Failure, LedgerEntry
from store.vectors.records import StoredChunk

__all__ = ["Facts", "SourceFacts", "State", "Verdict", "verdict"]


class State(StrEnum):
    """Where a record stands, as the verdict's first word says."""

    CURRENT = "current"
    #: A pushed record whose newest indexed push is stored: the app holds its content, so no more can be told.
    INDEXED = "indexed"
    STALE = "stale"
    NOT_INDEXED = "not indexed"
    FAILED = "failed"
    MISSING = "missing"
    GONE = "gone"
    #: The source could not be read, and nothing else is wrong.
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class SourceFacts:
    """The record in its source: ``found`` None when it was not read (pushed records: the app holds them; or
    the read failed, ``note`` says why). ``hash`` is the content hash a worker would give it now (None: not
    computed, ``note`` says why)."""

    kind: str
    found: bool | None
    text: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    stamp: str = ""
    hash: str | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class Facts:
    """Everything ``explain`` read about one record of one collection.

    ``generation`` is the physical collection a search reads (``notes``, or ``notes__g2`` after a migration);
    ``outbox_rows`` None: the collection has no change capture (or its outbox could not be read, see
    ``notes``); ``queued`` None: coalescing is off or Redis could not say.
    """

    collection: str
    record_id: str
    generation: str
    backend: str
    source: SourceFacts
    entry: LedgerEntry | None
    chunks: list[StoredChunk]
    failure: Failure | None = None
    outbox_rows: int | None = None
    outbox_since: datetime | None = None
    queued: bool | None = None
    #: What could not be told, part by part (a backend without write times, a part that could not be read).
    notes: list[str] = field(default_factory=list)
    #: Where its chunks are (``store.explain.gather.place_of``): the pgvector table, the Qdrant collection.
    place: str = ""

    @property
    def waiting(self) -> bool:
        """Whether a change of this record is on its way to a worker (an outbox row or a queued mark)."""
        return bool(self.outbox_rows) or bool(self.queued)

    @property
    def pushed(self) -> bool:
        return self.source.kind == "push"

    @property
    def verdict(self) -> Verdict:
        """``verdict(self)``: where the record stands."""
        return verdict(self)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The state and the one line that explains it, with the fix when there is one."""

    state: State
    line: str


def verdict(facts: Facts) -> Verdict:
    """Where the record stands: gone, failed, missing, not indexed, stale, unknown, then current (or indexed)."""
    for rule in (_gone, _failed, _missing, _not_indexed, _stale, _unknown):
        found = rule(facts)
        if found is not None:
            return found
    if facts.pushed:
        version = facts.entry.version if facts.entry is not None else 0
        return Verdict(
            State.INDEXED,
            f"searchable: its pushed version {version} is indexed (the app holds its content, so whether it "
            "changed since cannot be read here)",
        )
    return Verdict(State.CURRENT, "searchable and current" + ("; a change is queued" if facts.waiting else ""))


def _index_command(facts: Facts) -> str:
    if facts.pushed:
        return "push it again with index_document"
    return f"run `vectorsync index {facts.collection} {_quoted(facts.record_id)}`"


def _quoted(record_id: str) -> str:
    plain = record_id and all(c.isalnum() or c in "-_.:@" for c in record_id)
    return record_id if plain else "'" + record_id.replace("'", "'\\''") + "'"


def _gone(facts: Facts) -> Verdict | None:
    entry = facts.entry
    if facts.pushed and entry is not None and not entry.content_hash:
        deleted = f"gone: its push of version {entry.version} deleted it"
        if facts.chunks:
            return Verdict(State.GONE, f"{deleted}, yet {len(facts.chunks)} chunks remain: send delete_document again")
        return Verdict(State.GONE, f"{deleted}, and nothing of it is stored")
    if facts.source.found is not False:
        return None
    if not facts.chunks:
        return Verdict(State.GONE, "gone from the source: nothing of it is stored, as it should be")
    left = f"gone from the source: its {len(facts.chunks)} chunks are still searchable"
    if facts.waiting:
        return Verdict(State.GONE, f"{left}; a change is queued, which deletes them")
    return Verdict(State.GONE, f"{left}: {_index_command(facts)} to delete them")


def _failed(facts: Facts) -> Verdict | None:
    failure = facts.failure
    if failure is None:
        return None
    error = " ".join(failure.error.split())
    fix = "push it again with index_document" if facts.pushed else "retry with `vectorsync failures --retry`"
    return Verdict(State.FAILED, f"failed: {error} ({failure.attempts} attempts), {fix}")


def _missing(facts: Facts) -> Verdict | None:
    entry = facts.entry
    if entry is None or not entry.chunks or len(facts.chunks) == entry.chunks:
        return None
    if facts.chunks:
        lost = f"the store holds {len(facts.chunks)} of the {entry.chunks} chunks the ledger recorded"
    else:
        lost = f"the store lost its {entry.chunks} chunks (the ledger still records them)"
    return Verdict(State.MISSING, f"missing: {lost}; {_restore_command(facts)}")


def _restore_command(facts: Facts) -> str:
    """What restores lost chunks: ``verify --repair`` makes the ledger forget the record and indexes it again
    (``vectorsync index`` alone skips it, its hash being the ledger's); a pushed record's content is the app's."""
    name = facts.collection
    if facts.pushed:
        return "push it again (index_document), or delete it; `vectorsync verify` lists every such record"
    return f"run `vectorsync verify {name} --repair` (`vectorsync index` alone skips it as unchanged)"


def _not_indexed(facts: Facts) -> Verdict | None:
    if facts.entry is not None and facts.entry.content_hash:
        return None
    if facts.pushed and facts.entry is None:
        return Verdict(State.NOT_INDEXED, "not indexed: no push of this id was indexed (send it with index_document)")
    if facts.source.found is not True:
        return None
    if facts.waiting:
        return Verdict(State.NOT_INDEXED, "not indexed yet: a change is queued")
    return Verdict(State.NOT_INDEXED, f"not indexed yet and nothing is queued: {_index_command(facts)}")


def _stale(facts: Facts) -> Verdict | None:
    entry, now = facts.entry, facts.source.hash
    if entry is None or now is None or now == entry.content_hash:
        return None
    when = f"at {facts.source.stamp}" if facts.source.stamp else "since it was indexed"
    if entry.indexed_at is not None and not facts.source.stamp:
        when = f"since it was indexed at {entry.indexed_at:%Y-%m-%d %H:%M:%S}"
    if facts.waiting:
        return Verdict(State.STALE, f"stale: the source changed {when}, a change is queued")
    return Verdict(State.STALE, f"stale: the source changed {when} and nothing is queued: {_index_command(facts)}")


def _unknown(facts: Facts) -> Verdict | None:
    if facts.pushed or facts.source.hash is not None:
        return None
    return Verdict(State.UNKNOWN, f"unknown: {facts.source.note or 'the source was not read'}")
