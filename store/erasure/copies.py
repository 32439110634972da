"""Erasure: when records are deleted, every copy derived from them goes with them.

The store's rows go, and with them their keyword statistics and postings (each backend's delete). The
embedding cache keeps a vector per (scope, model, text): the entries of the deleted texts that no chunk the
collection still holds are deleted too, found by the text hashes the chunks kept. The ledger keeps a pushed
document's tombstone (its id and version, no hash of its text), so a late older push stays dropped.

``erase`` is what an indexed delete runs (``worker.pipeline``); ``vectorsync forget`` runs it on demand
(``store.erasure.receipt``) and prints what each place held.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from store.embeddings.cache import EmbeddingCache
from store.vectors.base import Collection
from store.vectors.filters import Filter

__all__ = ["Erased", "erase"]


@dataclass(frozen=True, slots=True)
class Erased:
    """What one erasure removed: the chunks of the records, and the cache entries of their texts."""

    chunks: int
    cache_entries: int
    #: Distinct texts of theirs another record of the collection still holds: their cache entries stay.
    texts_kept: int


def erase(
    collection: Collection,
    record_ids: Sequence[str],
    *,
    cache: EmbeddingCache | None,
    scope: str,
    models: Sequence[str] = (),
    count: bool = False,
) -> Erased:
    """Delete every chunk of ``record_ids`` from ``collection``, then the cache entries (in ``scope``, under each
    chunk's model and ``models``) of the texts no chunk of the collection still holds. The caller holds the
    records' locks. ``count``: the chunks are counted even without a cache (else read only to find its entries).
    Raises StoreUnavailable (the store, or Redis: an erasure never passes for done)."""
    ids = list(dict.fromkeys(record_ids))
    if not ids:
        return Erased(0, 0, 0)
    chunks = collection.chunk_digests(ids) if cache is not None or count else []
    collection.delete_where(Filter.any_of("record_id", ids))
    if cache is None or not chunks:
        return Erased(len(chunks), 0, 0)
    by_model: dict[str, set[str]] = {}
    for chunk in chunks:
        by_model.setdefault(chunk.model, set()).add(chunk.text_hash)
    removed = kept = 0
    for model, digests in by_model.items():
        held = set(collection.vectors_by_hash(sorted(digests), model=model))
        gone = sorted(digests - held)
        kept += len(held)
        removed += cache.forget_many(sorted({model, *models}), collection.dimensions, gone, scope=scope)
    return Erased(len(chunks), removed, kept)
