"""The indexing pipeline for a batch of records: load → skip unchanged → chunk → embed → swap.

No transaction or lock is held while a provider is called. Writes take the
records' locks, re-read the source and drop any result computed from a state
that has changed since (the task enqueued for that change writes it), so
concurrent tasks never leave stale or duplicate chunks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from store.embeddings import Embedding, Embeddings, Reuse
from store.erasure.copies import erase
from store.errors import ConfigError, EmbeddingError, InputError, StoreError, StoreUnavailable
from store.settings import LimitSettings
from store.state.generations.base import parse_name
from store.state.ledger import Held, Ledger, LedgerEntry
from store.vectors.base import Collection
from store.vectors.indexed import check_indexed
from store.vectors.records import VectorRecord, check_record_id, clean_text, validate_metadata
from store.vectors.stored import StoredVectors
from worker.batches import BatchResult, Document, Leftovers, Planned, WriteCheck, content_hash, failure, storable
from worker.chunking import Chunker
from worker.metrics import stage
from worker.sources.base import Source, SourceRecord
from worker.sources.push import PushSource

__all__ = ["BatchResult", "Document", "Indexer", "Leftovers", "Recipe", "content_hash"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recipe:
    """How a record's text becomes vectors: ``chunker`` cuts it, ``embeddings`` embeds the chunks. Both are in
    the record's content hash, so a change to either makes its chunks anew."""

    chunker: Chunker
    embeddings: Embeddings


class Indexer:
    """Keeps one collection's chunks equal to its source, a batch of record ids at a time."""

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
        #: migration replaces, embedded by the same model at the same size (``worker.process`` sets it).
        self.replaces: Callable[[], Sequence[Collection]] = tuple
        #: The embedding cache's scope: its collection's (``[collections.NAME] cache``; ``worker.process`` sets it).
        self.cache_scope = parse_name(name)[0]

    # -- entry points ---------------------------------------------------------------

    def index(self, ids: Sequence[str], *, leftovers: Leftovers | None = None, fresh: bool = False) -> BatchResult:
        """Bring the chunks of ``ids`` in line with the source's current state.

        With ``leftovers`` (a bulk batch of a pooled run) only whole provider calls are made: a partly filled
        last call is first filled with records ``leftovers`` holds, and what still does not fill one is left
        there (``BatchResult.deferred``) for a later batch, instead of costing a call of its own.

        ``fresh``: the ledger held none of ``ids`` when the fan-out looked (a first load), so it is not read
        again to skip unchanged records. That is safe, because that read only ever saves work: every record
        is then planned as changed, and its write still happens under its lock after the source is read
        again, so a record another task indexed meanwhile is written once more as the source holds it (its
        texts are cache hits: no provider call), never left stale. Pushed records are never fresh.
        """
        result = BatchResult()
        ids = storable(list(dict.fromkeys(str(i) for i in ids)), result, max_chars=self.limits.max_id_chars)
        with stage("load"):
            planned = self._load(ids, result, fresh=fresh)
            reuse = self.reuse(fresh=fresh)
            if leftovers is not None and planned:
                planned += self._fill_up(planned, leftovers, set(ids), result, reuse)
        with stage("embed"):
            if leftovers is None:
                ready = self._embed(planned, result, reuse)
            else:
                ready = self._embed_whole(planned, result, leftovers, reuse)
        with stage("write"):
            self._swap(ready, result, check=WriteCheck(self._same_in_source))
        return result

    def _load(self, ids: list[str], result: BatchResult, *, fresh: bool = False) -> list[Planned]:
        """Read ``ids``, delete the chunks of those gone, and plan the rest (unchanged ones are skipped, unless
        ``fresh``: see ``index``)."""
        current = self._fetch(ids, result)
        self._delete_gone([i for i in ids if i not in current and i not in result.failed], result)
        return self._plan(list(current.values()), result, entries={} if fresh else None)

    def _fill_up(
        self, planned: list[Planned], leftovers: Leftovers, own: set[str], result: BatchResult, reuse: Reuse | None
    ) -> list[Planned]:
        """More records, from ``leftovers``, whose texts fill the batch's last provider call up (in
        ``result.claimed``: their own batches count them)."""
        texts = self.embeddings.uncached([t for p in planned for t in p.texts], reuse=reuse, scope=self.cache_scope)
        short = -len(texts) % self.embeddings.call_size
        if not short:
            return []
        try:
            claimed = [i for i in leftovers.claim(short) if i not in own]
        except StoreUnavailable as exc:  # the batch's own records are indexed all the same
            log.warning("could not take records from the leftover pool (%s): the last call goes partly filled", exc)
            return []
        result.claimed.extend(claimed)
        return self._load(claimed, result) if claimed else []

    def _embed_whole(
        self, planned: list[Planned], result: BatchResult, leftovers: Leftovers, reuse: Reuse | None
    ) -> list[tuple[Planned, list[Embedding]]]:
        """Embed in whole provider calls; the records of the partly filled last one go to ``leftovers``. On a
        failure, as ``_embed`` (each record alone); when ``leftovers`` cannot take them, they are embedded now."""
        try:
            found, _ = self.embeddings.embed_whole_calls(
                [t for p in planned for t in p.texts], reuse=reuse, scope=self.cache_scope
            )
        except EmbeddingError:
            return self._embed(planned, result, reuse)
        ready: list[tuple[Planned, list[Embedding]]] = []
        later: dict[str, int] = {}
        waiting: list[Planned] = []
        for plan in planned:
            if all(t in found for t in plan.texts):
                ready.append((plan, [found[t] for t in plan.texts]))
            else:
                later[plan.record.id] = len({t for t in plan.texts if t not in found})
                waiting.append(plan)
        if later:
            try:
                leftovers.defer(later)
                result.deferred.extend(later)
            except StoreUnavailable as exc:
                log.warning(
                    "could not leave %d records for a fuller provider call (%s): embedding them now", len(later), exc
                )
                ready += self._embed(waiting, result, reuse)
        return ready

    def index_documents(self, documents: Sequence[Document]) -> BatchResult:
        """Index pushed documents; an older push of an id than the one indexed is dropped.

        Raises ConfigError for a collection that reads its records from a source."""
        self._require_pushed()
        result = BatchResult()
        good = set(storable([d.id for d in documents], result, max_chars=self.limits.max_id_chars))
        newest: dict[str, Document] = {}
        for doc in (d for d in documents if d.id in good):
            if doc.id not in newest or doc.version >= newest[doc.id].version:
                newest[doc.id] = doc
        records = [SourceRecord(d.id, d.text, dict(d.metadata)) for d in newest.values()]
        planned = self._plan(records, result, versions={d.id: d.version for d in newest.values()})
        ready = self._embed(planned, result, self.reuse())
        self._swap(ready, result, check=WriteCheck(self._newest_push, reads_ledger=True))
        return result

    def delete_documents(self, ids: Sequence[str], *, version: int = 0) -> BatchResult:
        """Remove pushed documents, unless a newer push of them was indexed.

        The ledger keeps a tombstone (no content hash) at ``version``, so a push
        older than the delete that arrives late is dropped too.
        """
        self._require_pushed()
        result = BatchResult()
        ids = storable(list(ids), result, max_chars=self.limits.max_id_chars)
        with self.ledger.locked(self.name, ids, read=True) as held:
            known = held.entries(list(ids))
            gone = [i for i in ids if i not in known or known[i].version <= version]
            if gone:
                erase(self.collection, gone, cache=self.embeddings.cache, scope=self.cache_scope)
                held.record_indexed([LedgerEntry(i, "", "", 0, version) for i in gone])
        result.deleted.extend(gone)
        result.superseded.extend(i for i in ids if i not in gone)
        return result

    def stale_ids(
        self, stamped: Sequence[tuple[str, str]], *, known: Mapping[str, LedgerEntry] | None = None
    ) -> list[str]:
        """Which of these (id, stamp) pairs the index does not follow: new, changed or gone, in their order.

        For reconcile sweeps and reindexes. An id the ledger does not hold is new: stale without a read. A
        record whose stamp holds (``stamp_holds``) is taken as unchanged without reading it, so only records
        whose stamp moved (or that keep no stamp) are read and hashed. ``known``: the ledger entries of these
        ids, when the caller has them already.
        """
        ledger = known if known is not None else self.ledger.entries(self.name, [i for i, _ in stamped])
        moved = [i for i, stamp in stamped if i in ledger and not self.stamp_holds(ledger[i], stamp)]
        unreadable = BatchResult()
        current = self._fetch(moved, unreadable) if moved else {}
        # A record the source cannot give is stale too: its batch reads it again and records why it fails.
        stale = {
            i
            for i in moved
            if i in unreadable.failed or i not in current or not self._ledger_holds_record(ledger[i], current[i])
        }
        return [i for i, _ in stamped if i not in ledger or i in stale]

    def stamp_holds(self, known: LedgerEntry, stamp: str) -> bool:
        """Whether the source's ``stamp`` is the one ``known`` was indexed at, by the chain's first model."""
        return bool(stamp) and known.stamp == stamp and known.model == self.embeddings.space

    def forget_if_lost(self) -> bool:
        """When the collection is empty but the ledger says records are indexed (the collection was dropped,
        or its store lost its data), forget the ledger so that every record is indexed again. True if so."""
        if not self.collection.is_empty() or not self.ledger.record_ids(self.name):
            return False
        log.warning(
            "collection %s is empty but its ledger is not: forgetting the ledger, so everything is indexed again",
            self.name,
        )
        self.ledger.forget_collection(self.name)
        return True

    def stale(self, *, page_size: int) -> list[str]:
        """Every id the index does not follow, for a reconcile sweep: new, changed, or gone from the source.

        Pages through the source's ids with their stamps; only records whose stamp
        moved are read and hashed (``stale_ids``); ledger ids the source no longer
        has are gone (their batch deletes them).
        """
        stale: list[str] = []
        seen: set[str] = set()
        after: str | None = None
        while stamped := self.source.page_stamps(after=after, limit=page_size):
            stale.extend(self.stale_ids(stamped))
            seen.update(record_id for record_id, _ in stamped)
            after = stamped[-1][0]
        stale.extend(sorted(self.ledger.record_ids(self.name) - seen))
        return stale

    def _ledger_holds_record(self, known: LedgerEntry, record: SourceRecord) -> bool:
        """Whether the ledger's entry is this source record as it reads now (``holds``)."""
        try:
            return self.holds(known, self._content_hash(record))
        except Exception:  # a record that cannot be hashed is not current: its batch says why
            return False

    # -- stages ---------------------------------------------------------------------

    def _require_pushed(self) -> None:
        if not isinstance(self.source, PushSource):
            raise ConfigError(
                f"collection {self.name!r} reads its records from its source ({type(self.source).__name__}); "
                "index_document and delete_document are for collections whose records are pushed "
                f"(collections.{self.name}.source.kind = 'push'): use index_record for this one"
            )

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

    def content_hash(self, record: SourceRecord) -> str:
        """The content hash this indexer gives ``record`` as the source returned it (``explain`` compares it with
        the ledger's). Raises ConfigError."""
        return self._content_hash(record)

    def _content_hash(self, record: SourceRecord) -> str:
        """The content hash of the record as it will be stored. Raises ConfigError."""
        return self._clean_content_hash(self._clean(record))

    def _fetch(self, ids: list[str], result: BatchResult) -> dict[str, SourceRecord]:
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
            found.update(self._fetch([record_id], result))
        return found

    def _delete_gone(self, gone: list[str], result: BatchResult) -> None:
        if not gone:
            return
        with self.ledger.locked(self.name, gone) as held:
            still_gone = [i for i in gone if i not in self.source.fetch(gone)]
            if still_gone:
                erase(self.collection, still_gone, cache=self.embeddings.cache, scope=self.cache_scope)
                held.forget(still_gone)
        result.deleted.extend(still_gone)
        result.superseded.extend(i for i in gone if i not in still_gone)

    def _plan(
        self,
        records: list[SourceRecord],
        result: BatchResult,
        versions: Mapping[str, int] | None = None,
        entries: Mapping[str, LedgerEntry] | None = None,
    ) -> list[Planned]:
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

    def holds(self, known: LedgerEntry, digest: str) -> bool:
        """Whether the ledger's entry is this content, embedded by the chain's first model (a record a fallback
        model embedded is embedded again once that model is back)."""
        return known.content_hash == digest and known.model == self.embeddings.space

    def reuse(self, fresh: bool = False) -> Reuse:
        """The vectors of the chain's first model stored already for texts (by their hash), so that a text is not
        bought twice: a metadata-only edit, an edit's unchanged chunks, a chunker change that keeps texts, a text
        another record holds, with the embedding cache expired or flushed. Read from this collection (not for a
        ``fresh`` batch: a first load's), then from ``replaces()`` for the rest."""
        own = None if fresh else self.collection
        return StoredVectors(own, model=self.embeddings.space, others=self.replaces)

    def _embed(
        self, planned: list[Planned], result: BatchResult, reuse: Reuse | None = None
    ) -> list[tuple[Planned, list[Embedding]]]:
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
            return [pair for p in planned for pair in self._embed([p], result, reuse)]
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

    def _swap(self, ready: list[tuple[Planned, list[Embedding]]], result: BatchResult, *, check: WriteCheck) -> None:
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
                self._swap([one], result, check=check)

    def _write(self, ready: list[tuple[Planned, list[Embedding]]], result: BatchResult, check: WriteCheck) -> None:
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

    def _same_in_source(self, ids: Sequence[str], held: Held) -> Callable[[Planned], bool]:
        """Read records: a result is current when the source, read again under the locks, hashes the same."""
        now = self._fetch(list(ids), BatchResult())

        def current(plan: Planned) -> bool:
            fresh = now.get(plan.record.id)
            if fresh is not None and fresh == plan.read:  # read again as it was read: the same content
                return True
            try:
                return fresh is not None and self._content_hash(fresh) == plan.hash
            except Exception:  # changed into something that cannot be indexed: its own task says why
                return False

        return current

    def _newest_push(self, ids: Sequence[str], held: Held) -> Callable[[Planned], bool]:
        """Pushed records: a result is current unless a newer push (or delete) was indexed meanwhile."""
        known = held.entries(ids)

        def current(plan: Planned) -> bool:
            entry = known.get(plan.record.id)
            return entry is None or entry.version <= plan.version

        return current

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
