"""``verify``: the chunks no ledger entry accounts for, then a collection's ledger and its store read in pages and
compared record by record (``compare``), then the keyword statistics against a recount.

Memory stays bounded: ledger entries come ``PAGE`` at a time by id, and with them only the chunks of those
records (their text as a hash, computed where the backend can); orphans are found from pages of the store's
record ids. Workers go on meanwhile: a record that looks drifted is read again under its ledger lock, which a
worker's write of it holds too, so a write half done is never reported; and ``repair`` forgets its entry under
that same lock before sending it to be indexed again.

Nothing is lost to a part that cannot be reached: a repair opens the source before it sends anything, and a drifted
record the broker does not take gets its ledger entry back, so the next verify reports it again.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from store.errors import BrokerUnavailable, ConfigError, StoreUnavailable
from store.explain.gather import Parts, backend_of, declared, place_of
from store.state.generations.base import parse_name
from store.verify.drift import Expected, RecordDrift, Repair, Report, compare

if TYPE_CHECKING:
    from store.state.ledger import Ledger, LedgerEntry
    from store.vectors.base import Collection
    from store.vectors.records import ChunkDigest

__all__ = ["PAGE", "SHOWN", "ChunkReader", "verify"]

#: Records (ledger entries, or the store's record ids) read at once.
PAGE = 500
#: Drifted records a report keeps to show; the counts hold all of them.
SHOWN = 20


class ChunkReader(Protocol):
    """Reads records as a worker would and says what their chunks' texts would be
    (``worker.repair.chunk_reading.ChunkReading`` is the worker's)."""

    def expected(self, collection: str, record_ids: Sequence[str]) -> dict[str, Expected]:
        """Each record's ``Expected``; a record the source cannot give is left out or ``found`` None. Opens the
        source on first use: raises StoreUnavailable when it cannot be reached (no ids: opens it, reads nothing)."""
        ...


class _Unsent(Exception):
    """The broker did not take one of a repair's ``index_batch`` tasks: ``ids`` were not sent (that batch's and
    those after it), ``cause`` is what the send raised."""

    def __init__(self, ids: list[str], cause: Exception) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.ids = ids
        self.cause = cause


@dataclass
class _Run:
    """One verify's parts and what it has found so far."""

    parts: Parts
    name: str
    collection: Collection
    report: Report
    source: ChunkReader | None
    repair: bool
    #: What ``repair`` did so far: records forgotten and sent, orphans' record ids sent, tasks.
    sent: dict[str, int] = field(default_factory=lambda: {"reindexed": 0, "orphans": 0, "batches": 0})

    @property
    def ledger(self) -> Ledger:
        return self.parts.ledger

    def found(self, drifts: Sequence[RecordDrift], *, orphans: bool = False) -> None:
        report = self.report
        report.first.extend(drifts[: max(0, SHOWN - len(report.first))])
        for drift in drifts:
            for kind in drift.kinds:
                report.kinds[kind] = report.kinds.get(kind, 0) + 1
        if orphans:
            report.orphan_records += len(drifts)
        else:
            report.drifted += len(drifts)

    def send(self, ids: list[str], counted: str) -> None:
        """Send ``ids`` as ``index_batch`` tasks of ``worker.batch_size`` ids, counted under ``counted`` as each is
        taken. Raises _Unsent, naming the ids not sent, when the broker does not take one."""
        size = self.parts.settings.worker.batch_size
        for start in range(0, len(ids), size):
            batch = ids[start : start + size]
            try:
                self.parts.producer.index_batch(self.name, batch)
            except Exception as exc:  # kombu's OperationalError, a socket's, a Redis client's: not sent, whatever it is
                raise _Unsent(ids[start:], exc) from exc
            self.sent["batches"] += 1
            self.sent[counted] += len(batch)


def verify(
    parts: Parts, collection: str, *, sample: int | None = None, source: ChunkReader | None = None, repair: bool = False
) -> Report:
    """Compare ``collection``'s ledger with its store (every record, or ``sample`` drawn at random); ``repair``:
    fix what drifted through the normal paths (``Report.repair`` says what was done). Raises ConfigError for an
    unknown collection, a bad sample or a repair of a generation's name; StoreUnavailable."""
    started = time.perf_counter()
    config = declared(parts.settings, collection)
    if sample is not None and sample < 1:
        raise ConfigError(f"--sample must be a positive number of records, got {sample}")
    if repair and parse_name(collection)[1] is not None:
        raise ConfigError(
            f"repair works on a collection's name, not a generation's ({collection!r}): verify "
            f"{parse_name(collection)[0]!r}, which repairs its live generation"
        )
    stored = parts.router.read(collection)
    generation = parts.router.reading(collection).physical
    report = Report(collection, generation, backend_of(stored), sample=sample, place=place_of(stored))
    run = _Run(parts, collection, stored, report, source, repair and config.source.kind != "push")
    if source is None:
        report.notes.append("chunk texts were not compared with the source (no source reader)")
    if run.repair:
        _open_source(run)  # before anything is sent: a source that cannot be read stops a repair with nothing sent
    _orphans(run)  # first: a repair's forgotten entries would make their records look like orphans
    for page in _pages(parts.ledger, generation, sample):
        _check(run, page)
    report.keyword_terms = stored.keyword_drift()
    if repair:
        report.repair = _repaired(run, pushed=config.source.kind == "push")
    report.seconds = time.perf_counter() - started
    return report


def _open_source(run: _Run) -> None:
    """Ask the reader for no record, which opens the source: one that cannot be reached raises StoreUnavailable
    now, saying that nothing was sent, rather than after a repair sent the orphans. (Without ``repair`` nothing
    is sent: the first page's read raises it.)"""
    if run.source is None:
        return
    try:
        run.source.expected(run.name, [])
    except StoreUnavailable as exc:
        raise StoreUnavailable(
            f"{exc}; verify stopped before comparing or sending anything, so nothing was sent or changed: "
            f"{_again(run)} once the source answers (collections.{parse_name(run.name)[0]}.source)"
        ) from exc


def _pages(ledger: Ledger, generation: str, sample: int | None) -> Iterator[list[LedgerEntry]]:
    """The ledger's entries, a page at a time: all of them by id, or ``sample`` drawn uniformly (a reservoir
    over the pages of ids, so no more than ``sample`` ids are held)."""
    if sample is None:
        after = None
        while page := ledger.entries_page(generation, after=after, limit=PAGE):
            yield page
            after = page[-1].record_id
        return
    chosen: list[str] = []
    seen, after, draw = 0, None, random.Random()
    while page := ledger.entries_page(generation, after=after, limit=PAGE):
        for entry in page:
            seen += 1
            if len(chosen) < sample:
                chosen.append(entry.record_id)
            elif (slot := draw.randrange(seen)) < sample:
                chosen[slot] = entry.record_id
        after = page[-1].record_id
    chosen.sort()
    for start in range(0, len(chosen), PAGE):
        found = ledger.entries(generation, chosen[start : start + PAGE])
        yield [found[i] for i in chosen[start : start + PAGE] if i in found]


def _by_record(chunks: Sequence[ChunkDigest]) -> dict[str, list[ChunkDigest]]:
    grouped: dict[str, list[ChunkDigest]] = {}
    for chunk in chunks:
        grouped.setdefault(chunk.record_id, []).append(chunk)
    return grouped


def _check(run: _Run, page: list[LedgerEntry]) -> None:
    """Compare one page of entries with their chunks; confirm (and repair) the drifted ones under their locks."""
    ids = [e.record_id for e in page]
    chunks = _by_record(run.collection.chunk_digests(ids))
    expected = run.source.expected(run.name, ids) if run.source is not None else {}
    run.report.records += len(page)
    run.report.chunks += sum(len(c) for c in chunks.values())
    run.report.stale += sum(
        1 for e in page if e.record_id in expected and not _current(e, expected[e.record_id]) and e.content_hash
    )
    dims = run.collection.dimensions
    suspects = [
        e.record_id
        for e in page
        if compare(e.record_id, e, chunks.get(e.record_id, []), dimensions=dims, expected=expected.get(e.record_id))
    ]
    if suspects:
        run.found(_confirmed(run, suspects, expected))


def _current(entry: LedgerEntry, expected: Expected) -> bool:
    return bool(expected.found) and expected.content_hash == entry.content_hash


def _confirmed(run: _Run, ids: list[str], expected: dict[str, Expected]) -> list[RecordDrift]:
    """The drifts of ``ids`` read again under their ledger locks (a worker writing one of them is waited for);
    with ``repair``, the drifted records' entries are forgotten under the same locks, then they are sent."""
    dims = run.collection.dimensions
    with run.ledger.locked(run.report.generation, ids, read=True) as held:
        entries = held.entries(ids)
        chunks = _by_record(run.collection.chunk_digests(ids))
        drifts = [
            d
            for i in ids
            if (d := compare(i, entries.get(i), chunks.get(i, []), dimensions=dims, expected=expected.get(i)))
        ]
        drifted = [d.record_id for d in drifts]
        if run.repair and drifted:
            held.forget(drifted)
    if run.repair and drifted:
        _resend(run, drifted, {i: entries[i] for i in drifted if i in entries})
    return drifts


def _resend(run: _Run, ids: list[str], forgotten: dict[str, LedgerEntry]) -> None:
    """Send the drifted records forgotten by the ledger (forgotten first: a worker skips a record whose entry
    still holds its content hash). Those the broker does not take get their entries back, so nothing is lost."""
    try:
        run.send(ids, "reindexed")
    except _Unsent as unsent:
        back = [forgotten[i] for i in unsent.ids if i in forgotten]
        try:
            _restore(run, back)
        except StoreUnavailable as exc:
            raise StoreUnavailable(
                f"the broker did not take a repair's index_batch task ({unsent}) and the ledger entries of "
                f"{len(back)} records could not be put back ({exc}): `vectorsync reconcile {run.name}` sends "
                f"them (it indexes every record the ledger does not hold): {_listed(unsent.ids)}"
            ) from exc
        raise BrokerUnavailable(
            f"the broker did not take a repair's index_batch task ({unsent}): {len(unsent.ids)} drifted records "
            f"of {run.name!r} were not sent and their ledger entries are back as they were, so nothing was lost: "
            f"{_again(run)} once the broker answers (broker.url)"
        ) from unsent.cause


def _restore(run: _Run, entries: list[LedgerEntry]) -> None:
    """Put back the entries of records forgotten but not sent, under their locks; a record indexed since (by a
    task of its own) keeps the entry that task wrote."""
    ids = [e.record_id for e in entries]
    if not ids:
        return
    with run.ledger.locked(run.report.generation, ids, read=True) as held:
        written = held.entries(ids)
        held.record_indexed([e for e in entries if e.record_id not in written])


def _again(run: _Run) -> str:
    return f"run `vectorsync verify {run.name}{' --repair' if run.repair else ''}` again"


def _listed(ids: Sequence[str], shown: int = 10) -> str:
    return ", ".join(ids[:shown]) + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


def _orphans(run: _Run) -> None:
    """Pages of the store's record ids; those the ledger holds no entry of are orphans, confirmed under their
    locks. ``repair`` sends them: their batch deletes what the source no longer has and indexes the rest."""
    after: str | None = None
    generation = run.report.generation
    while True:
        try:
            page = run.collection.record_ids_page(after=after, limit=PAGE)
        except NotImplementedError as exc:
            run.report.notes.append(f"orphan chunks were not looked for: {exc}")
            return
        if not page:
            return
        known = run.ledger.entries(generation, [i for i, _ in page])
        unknown = [i for i, _ in page if i not in known]
        if unknown:
            _confirm_orphans(run, unknown)
        after = page[-1][0]


def _confirm_orphans(run: _Run, ids: list[str]) -> None:
    with run.ledger.locked(run.report.generation, ids, read=True) as held:
        known = held.entries(ids)
        chunks = _by_record(run.collection.chunk_digests([i for i in ids if i not in known]))
    drifts = [d for i, c in chunks.items() if (d := compare(i, None, c, dimensions=run.collection.dimensions))]
    run.found(drifts, orphans=True)
    run.report.orphan_chunks += sum(len(c) for c in chunks.values())
    if run.repair and drifts:
        try:
            run.send([d.record_id for d in drifts], "orphans")
        except _Unsent as unsent:
            raise BrokerUnavailable(
                f"the broker did not take a repair's index_batch task ({unsent}): {len(unsent.ids)} orphans' record "
                f"ids of {run.name!r} were not sent; their chunks are where they were, so nothing was lost: "
                f"{_again(run)} once the broker answers (broker.url)"
            ) from unsent.cause


def _repaired(run: _Run, *, pushed: bool) -> Repair:
    left = []
    if pushed and (run.report.drifted or run.report.orphan_records):
        left.append(
            "its records are pushed: push the drifted ones again (index_document) and delete the orphans "
            "(delete_document); nothing here can read them"
        )
    recounted = run.collection.recount_keywords() if run.report.keyword_terms else 0
    sent = run.sent
    return Repair(sent["reindexed"], sent["orphans"], sent["batches"], recounted, tuple(left))
