"""What a collection tells of the chunks it stores, besides search: a record's chunks, the vectors stored for chunk
texts (by the hash of each text, ``text_digest``), and the chunks' digests.

The vectors by hash are what lets a text stored anywhere in a collection go unbought the next time it is embedded
by the same model (``StoredVectors``, the pipeline's reuse): every backend keeps each chunk's text hash beside it.
``Collection`` takes these reads from ``StoredReads``; backends fill the ``_`` hooks.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence

from store.errors import ConfigError, StoreError
from store.vectors.records import ChunkDigest, StoredChunk, text_digest

__all__ = ["HASHES_PER_READ", "StoredReads", "StoredVectors", "check_hashes"]

log = logging.getLogger(__name__)

#: The most text hashes one read of ``vectors_by_hash`` sends to a backend (more are read in several).
HASHES_PER_READ = 500
_HASH = re.compile(r"[0-9a-f]{64}")


def check_hashes(hashes: Sequence[str]) -> list[str]:
    """``hashes`` without repeats, each checked to be a ``text_digest`` (64 lower-case hex digits). Raises
    ConfigError naming the first that is not."""
    if isinstance(hashes, str | bytes):
        raise ConfigError("vectors_by_hash takes a list of text hashes, not a single string")
    for value in hashes:
        if not isinstance(value, str) or not _HASH.fullmatch(value):
            raise ConfigError(
                f"text hash {value!r} is not a sha256 of a chunk's text as 64 lower-case hex digits: make it with "
                "store.vectors.records.text_digest(text)"
            )
    return list(dict.fromkeys(hashes))


class StoredReads:
    """The reads of stored chunks every ``Collection`` has; the hooks below are the backends'."""

    def chunks_of(self, record_id: str) -> list[StoredChunk]:
        """The chunks stored for ``record_id`` (the pipeline's ``record_id`` metadata), in chunk order.
        Raises StoreUnavailable."""
        return sorted(self._chunks_of(str(record_id)), key=lambda c: (c.chunk, c.id))

    def vectors_by_hash(self, hashes: Sequence[str], *, model: str) -> dict[str, list[float]]:
        """The vector ``model`` (an ``Embeddings.space``) made of each chunk text whose ``text_digest`` is in
        ``hashes``, stored by any record of this collection (of its dimensions), by hash; a hash no chunk of that
        model holds is left out. Read ``HASHES_PER_READ`` hashes at a time. Raises ConfigError (not a list of
        text hashes), StoreUnavailable."""
        wanted = check_hashes(hashes)
        found: dict[str, list[float]] = {}
        for start in range(0, len(wanted), HASHES_PER_READ):
            found.update(self._vectors_by_hash(wanted[start : start + HASHES_PER_READ], str(model)))
        return found

    def chunk_digests(self, record_ids: Sequence[str]) -> list[ChunkDigest]:
        """The chunks stored for these records, each as its text's hash and its vector's size, ordered by record and
        chunk (``verify`` reads a page of records at a time). Raises StoreUnavailable."""
        found = self._chunk_digests([str(i) for i in record_ids]) if record_ids else []
        return sorted(found, key=lambda c: (c.record_id, c.chunk, c.id))

    def record_ids_page(self, *, after: str | None, limit: int) -> list[tuple[str, int]]:
        """Up to ``limit`` record ids of the stored chunks after ``after``, ascending, each with its number of
        chunks. Raises StoreUnavailable; NotImplementedError where a backend cannot page them (Qdrant)."""
        return self._record_ids_page(after, limit)

    # -- backend hooks ----------------------------------------------------------------

    def _chunks_of(self, record_id: str) -> list[StoredChunk]:
        raise NotImplementedError

    def _vectors_by_hash(self, hashes: list[str], model: str) -> Iterable[tuple[str, list[float]]]:
        """(hash, vector) of the chunks of ``model`` whose text hash is in ``hashes`` (distinct, at most
        ``HASHES_PER_READ``); a hash held by several chunks may come more than once (any of them will do)."""
        raise NotImplementedError

    def _chunk_digests(self, record_ids: list[str]) -> list[ChunkDigest]:
        """A record at a time through ``_chunks_of``, no vector size; a backend with a faster way overrides it."""
        found = ((r, c) for r in record_ids for c in self._chunks_of(r))
        return [ChunkDigest(c.id, r, c.chunk, text_digest(c.text), c.model) for r, c in found]

    def _record_ids_page(self, after: str | None, limit: int) -> list[tuple[str, int]]:
        raise NotImplementedError(f"the {type(self).__name__} store cannot page its record ids")


class StoredVectors:
    """The vectors of one model already stored for chunk texts: a ``store.embeddings.Reuse``, which the pipeline
    hands ``Embeddings`` so that a text stored anywhere in its collection is not bought again.

    ``own`` is read first (None: skipped, as a first load's collection is); then, for what it lacks,
    ``others()``: collections whose vectors fit ``own`` too (a migration's live generation, of the same model and
    dimensions), asked for only when ``own`` lacks a text. A text is asked for once: a batch asks several times.
    An other collection that cannot be read is passed over (reuse only ever saves a provider call).
    """

    def __init__(
        self,
        own: StoredReads | None,
        *,
        model: str,
        others: Callable[[], Iterable[StoredReads]] = tuple,
    ) -> None:
        self.own, self.model, self.others = own, model, others
        self._held: dict[str, list[float]] = {}
        self._asked: set[str] = set()

    def __call__(self, texts: list[str]) -> dict[str, list[float]]:
        hashes = {text: text_digest(text) for text in texts}
        new = [h for h in dict.fromkeys(hashes.values()) if h not in self._asked]
        if new:
            self._asked.update(new)
            self._read(new)
        return {text: self._held[h] for text, h in hashes.items() if h in self._held}

    def _read(self, hashes: list[str]) -> None:
        if self.own is not None:
            self._held.update(self.own.vectors_by_hash(hashes, model=self.model))
        missing = [h for h in hashes if h not in self._held]
        if not missing:
            return
        for other in self.others():
            try:
                self._held.update(other.vectors_by_hash(missing, model=self.model))
            except StoreError as exc:
                log.warning("stored vectors of %r not read (%s): those texts are embedded", other, exc)
            missing = [h for h in missing if h not in self._held]
            if not missing:
                return
