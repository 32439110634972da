"""One collection generation's pipeline: its parts (collection, source, recipe, ledger, limits) and the steps every
job over them shares: records read by id, cleaned and hashed, planned against the ledger, embedded, and swapped in.

No transaction or lock is held while a provider is called. Writes take the records' locks, and the job's
``WriteCheck`` drops any result computed from a state that has changed since (the task enqueued for that change
writes it), so concurrent tasks never leave stale or duplicate chunks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from store.embeddings import Embedding, Embeddings, Reuse
from store.errors import ConfigError, EmbeddingError, InputError, StoreError, StoreUnavailable
from store.settings import LimitSettings
from store.state.generations.base import parse_name
from store.state.ledger import Ledger, LedgerEntry
from store.vectors.base import Collection
from store.vectors.indexed import check_indexed
from store.vectors.records import VectorRecord, check_record_id, clean_text, validate_metadata
from store.vectors.stored import StoredVectors
from worker.pipeline.batch import BatchResult, Planned, WriteCheck, content_hash, failure
from worker.pipeline.chunker import Chunker
from worker.sources.base import Source, SourceRecord

__all__ = ["Pipeline", "Ready", "Recipe"]

log = logging.getLogger(__name__)

#: Records embedded and ready to write: each plan with the vectors of its chunks.
Ready = list[tuple[Planned, list[Embedding]]]


@dataclass(frozen=True)
class Recipe:
    """How a record's text becomes vectors: ``chunker`` cuts it, ``embeddings`` embeds the chunks. Both are in
    the record's content hash, so a change to either makes its chunks anew."""

    chunker: Chunker
    embeddings: Embeddings


class Pipeline:
    """One generation's parts, and the steps its jobs share: the batch ``Indexer``, the ``DocumentWriter`` of
    pushed documents, the ``Sweeper`` of reconcile sweeps and fan-outs."""

    def __init__(
        self,
        *,
        name: str,
        collection: Collection,
        source: Source,
        recipe: Recipe,
        ledger: Ledger,
        limits: LimitSettings | None = None,
    ) -> None:
        self.limits = limits if limits is not None else LimitSettings()
        self.name = name
        self.collection = collection
        self.source = source
        self.chunker = recipe.chunker
        self.embeddings = recipe.embeddings
        self.ledger = ledger
        #: Collections whose stored vectors this one may take, asked when its own lacks a text: the generation a
        #: migration replaces, embedded by the same model at the same size (``worker.runtime.context`` sets it).
        self.replaces: Callable[[], Sequence[Collection]] = tuple
        #: The embedding cache's scope: its collection's (``[collections.NAME] cache``; the context sets it).
        self.cache_scope = parse_name(name)[0]

    # -- reading and hashing ----------------------------------------------------------

    def fetch(self, ids: list[str], result: BatchResult) -> dict[str, SourceRecord]:
        """The source's records among ``ids``. A read the source refuses (a value it cannot convert, an id out
        of range) is retried a record at a time, so only the record at fault fails; an unreachable source
        raises StoreUnavailable for the batch to be retried."""
        try:
            return self.source.fetch(ids)
        except (StoreUnavailable, ConfigError):  # an outage, or a source that cannot be read at all
            raise
        except (StoreError, ValueError, ArithmeticError) as exc:
            if len(ids) == 1:
                result.failed[ids[0]] = failure(
                    ids[0], exc, fix="fix the row in the source, or leave the column out of source.metadata"
                )
                return {}
        found: dict[str, SourceRecord] = {}
        for record_id in ids:
            found.update(self.fetch([record_id], result))
        return found

    def content_hash(self, record: SourceRecord) -> str:
        """The content hash of ``record`` as it will be stored, from the record as the source returned it
        (``explain`` compares it with the ledger's). Raises ConfigError."""
        return self._clean_content_hash(self._clean(record))

    def holds(self, known: LedgerEntry, digest: str) -> bool:
        """Whether the ledger's entry is this content, embedded by the chain's first model (a record a fallback
        model embedded is embedded again once that model is back)."""
        return known.content_hash == digest and known.model == self.embeddings.space

    def _clean(self, record: SourceRecord) -> SourceRecord:
        """The record as it will be stored: text without unstorable characters (before it is chunked and
        embedded), metadata a clean JSON object whose declared indexed fields hold their types, an id within
        limits. Raises ConfigError."""
        check_record_id(record.id, max_chars=self.limits.max_id_chars)
        metadata = validate_metadata(record.metadata, record_id=record.id, max_depth=self.limits.max_metadata_depth)
        check_indexed(metadata, self.collection.indexed, record_id=record.id, collection=self.name)
        return replace(record, text=clean_text(record.text), metadata=metadata)

    def _clean_content_hash(self, clean: SourceRecord) -> str:
        """The content hash of a record ``_clean`` made."""
        return content_hash(
            clean, chunker=self.chunker, model=self.embeddings.space, dimensions=self.embeddings.dimensions
        )

    # -- planning and embedding -------------------------------------------------------

    def plan(
        self,
        records: list[SourceRecord],
        result: BatchResult,
        versions: Mapping[str, int] | None = None,
        entries: Mapping[str, LedgerEntry] | None = None,
    ) -> list[Planned]:
        """What to embed of ``records``: each cleaned, hashed and cut into its chunks' texts; those the ledger
        holds already (``entries``, else read) are skipped, and one whose value cannot be indexed fails alone."""
        ledger = entries if entries is not None else self.ledger.entries(self.name, [r.id for r in records])
        planned: list[Planned] = []
        bumps: list[LedgerEntry] = []
        for raw in records:
            try:  # one record's bad value fails that record, not its batch
                record = self._clean(raw)
                digest = self._clean_content_hash(record)
            except Exception as exc:
                result.failed[raw.id] = failure(raw.id, exc)
                continue
            known = ledger.get(record.id)
            version = (versions or {}).get(record.id, 0)
            if known is not None and (known.version > version or self.holds(known, digest)):
                result.skipped.append(record.id)
                if known.version < version or known.stamp != record.stamp:
                    # the same content pushed again, or touched in the source: remember the newer marker
                    bumps.append(replace(known, version=max(known.version, version), stamp=record.stamp))
                continue
            most = self.limits.max_chunks_per_record
            texts = self.chunker.texts(record.text, limit=most + 1)  # cut no further than the limit allows
            if len(texts) > most:
                result.failed[record.id] = (
                    f"ConfigError: record {record.id!r} makes more than {most} chunks ({len(record.text)} characters), "
                    f"over limits.max_chunks_per_record ({most}): split the record, or raise the limit"
                )
                continue
            planned.append(Planned(record, digest, texts, version, raw))
        if bumps:
            with self.ledger.locked(self.name, [b.record_id for b in bumps]) as held:
                held.record_indexed(bumps)
        return planned

    def reuse(self, fresh: bool = False) -> Reuse:
        """The vectors of the chain's first model stored already for texts (by their hash), so that a text is not
        bought twice: a metadata-only edit, an edit's unchanged chunks, a chunker change that keeps texts, a text
        another record holds, with the embedding cache expired or flushed. Read from this collection (not for a
        ``fresh`` batch: a first load's), then from ``replaces()`` for the rest."""
        own = None if fresh else self.collection
        return StoredVectors(own, model=self.embeddings.space, others=self.replaces)

    def embed(self, planned: list[Planned], result: BatchResult, reuse: Reuse | None = None) -> Ready:
        """Embed every chunk of the batch together (``reuse``: vectors stored already); on failure, each record
        alone, so one bad record fails by itself."""
        if not planned:
            return []
        try:
            texts = [t for p in planned for t in p.texts]
            vectors = self.embeddings.embed_many(texts, reuse=reuse, scope=self.cache_scope)
        except EmbeddingError as exc:
            if len(planned) == 1:
                self._record_error(planned[0], exc, result)
                return []
            log.info("batch of %d records failed to embed (%s); embedding them one by one", len(planned), exc)
            return [pair for p in planned for pair in self.embed([p], result, reuse)]
        ready, start = [], 0
        for plan in planned:
            ready.append((plan, vectors[start : start + len(plan.texts)]))
            start += len(plan.texts)
        return ready

    def _record_error(self, plan: Planned, exc: EmbeddingError, result: BatchResult) -> None:
        if isinstance(exc, InputError):
            result.failed[plan.record.id] = failure(
                plan.record.id,
                exc,
                fix="the provider refused this record's text: fix it in the source, then `vectorsync failures --retry`",
            )
        else:
            result.retry[plan.record.id] = f"{type(exc).__name__}: {exc}"
            result.retry_after = max(result.retry_after, getattr(exc, "retry_after", None) or 0.0)

    # -- writing ----------------------------------------------------------------------

    def swap(self, ready: Ready, result: BatchResult, *, check: WriteCheck) -> None:
        """Write what is still current, under the records' locks; ``check`` judges it. A write the
        store refuses (not one it could not reach) is tried a record at a time, so only the one at fault fails."""
        if not ready:
            return
        try:
            self._write(ready, result, check)
        except StoreUnavailable:
            raise
        except StoreError as exc:
            if len(ready) == 1:
                plan = ready[0][0]
                result.failed[plan.record.id] = failure(plan.record.id, exc)
                return
            for one in ready:
                self.swap([one], result, check=check)

    def _write(self, ready: Ready, result: BatchResult, check: WriteCheck) -> None:
        ids = [plan.record.id for plan, _ in ready]
        with self.ledger.locked(self.name, ids, read=check.reads_ledger) as held:
            current = check.judge(ids, held)
            keep, records, entries = [], [], []
            for plan, embeddings in ready:
                if not current(plan):
                    result.superseded.append(plan.record.id)
                    continue
                keep.append(plan.record.id)
                records.extend(self._chunk_records(plan, embeddings))
                # A record without chunks was "embedded" by the chain's model all the same: it is current.
                models = ",".join(sorted({e.model for e in embeddings})) or self.embeddings.space
                entries.append(
                    LedgerEntry(plan.record.id, plan.hash, models, len(embeddings), plan.version, plan.record.stamp)
                )
            if keep:
                self.collection.replace_records(keep, records)
                held.record_indexed(entries)
        result.indexed.extend(keep)
        result.chunks += len(records)

    def _chunk_records(self, plan: Planned, embeddings: Iterable[Embedding]) -> list[VectorRecord]:
        record = plan.record
        return [
            VectorRecord(
                id=f"{record.id}:{index}",
                embedding=embedding,
                text=text,
                metadata={**record.metadata, "record_id": record.id, "chunk": index},
                model=embedding.model,
            )
            for index, (text, embedding) in enumerate(zip(plan.texts, embeddings, strict=True))
        ]
