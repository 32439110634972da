"""``vectorsync forget NAME ID...``: erase records on demand, and a receipt of every place looked in.

Each generation the collection writes loses the records' chunks, their keyword statistics and postings and the
cache entries of texts no other record of it holds (``store.erasure.copies``), under the records' locks; the ledger
forgets their entries and failures (a pushed document keeps a tombstone: its id and version, no hash of its
text, so a late older push stays dropped); a push kept in Redis for a resend and a coalescing mark go too.
The capture outbox holds ids only, never a record's text. The source is the app's: a record still there comes
back at the next reindex, so delete it there first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from store.embeddings.cache import cache_scope
from store.erasure.copies import erase
from store.explain.gather import declared
from store.state.ledger import LedgerEntry
from store.vectors.records import check_record_id

if TYPE_CHECKING:
    from store.client import Client
    from store.settings import CollectionSettings
    from store.state.generations.base import Generation

__all__ = ["Place", "Receipt", "forget"]


@dataclass(frozen=True, slots=True)
class Place:
    """One place looked in: what it held of the records, and what was removed."""

    place: str
    held: int
    removed: int
    note: str = ""


@dataclass(frozen=True, slots=True)
class Receipt:
    """What ``forget`` looked at and removed, place by place."""

    collection: str
    record_ids: tuple[str, ...]
    places: tuple[Place, ...]


def forget(client: Client, collection: str, record_ids: Sequence[str]) -> Receipt:
    """Erase ``record_ids`` from ``collection`` (every generation it writes) and say what each place held.
    Raises ConfigError (an unknown collection, a bad id), StoreUnavailable (a part that did not answer: what
    was erased stays erased, run it again)."""
    config = declared(client.settings, collection)
    most = client.settings.limits.max_id_chars
    ids = list(dict.fromkeys(check_record_id(str(i), max_chars=most) for i in record_ids))
    places: list[Place] = [*_broker(client, collection, ids)]
    for generation in client.router.writing(collection):
        places.extend(_generation(client, generation, config, ids))
    return Receipt(collection, tuple(ids), tuple(places))


def _broker(client: Client, collection: str, ids: list[str]) -> list[Place]:
    """The pushes kept for a resend (they hold the text) and the coalescing marks: dropped first, so none
    brings a record back after its erasure."""
    producer = client.producer
    kept = sum(producer.pushes.drop(collection, i) for i in ids)
    marks = sum(bool(producer.coalescer.queued(collection, i)) for i in ids)
    for record_id in ids:
        producer.coalescer.release(collection, record_id)
    return [
        Place("pushes kept for a resend (Redis)", kept, kept),
        Place("queued marks (Redis)", marks, marks, "ids only"),
    ]


def _generation(client: Client, generation: Generation, config: CollectionSettings, ids: list[str]) -> list[Place]:
    physical = generation.physical
    target = client.router.collection(generation)
    embeddings = client.router.parts(generation)[1] or client.embeddings
    failures = sum(f.record_id in ids for f in client.ledger.failures(physical))
    pushed = config.source.kind == "push"
    now = client.producer.clock.next() if pushed else 0  # a push still in flight is older: it stays dropped
    scope = cache_scope(config, generation.collection)
    with client.ledger.locked(physical, ids) as held:
        entries = held.entries(ids)
        erased = erase(target, ids, cache=embeddings.cache, scope=scope, count=True)
        if pushed:
            held.record_indexed([LedgerEntry(i, "", "", 0, max(now, _version(entries, i))) for i in ids])
        else:
            held.forget(ids)
    kept = f"{erased.texts_kept} of their texts another record holds: kept" if erased.texts_kept else ""
    tombstone = "a tombstone (id and version) kept per pushed document" if pushed else ""
    return [
        Place(f"chunks in {physical}, with their keyword statistics and postings", erased.chunks, erased.chunks),
        Place(f"embedding cache of {physical} (Redis)", erased.cache_entries, erased.cache_entries, kept),
        Place(f"ledger entries of {physical}", len(entries), len(entries), tombstone),
        Place(f"failures of {physical}", failures, failures),
    ]


def _version(entries: dict[str, LedgerEntry], record_id: str) -> int:
    entry = entries.get(record_id)
    return entry.version if entry is not None else 0
