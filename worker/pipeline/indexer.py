"""The batch indexer: a batch of record ids brought in line with the source, load -> skip unchanged -> chunk ->
embed -> swap, over one generation's ``Pipeline``; with a run's leftover pool, in whole provider calls only."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from store.batches.lane import RunLane
from store.embeddings import Embedding, Reuse
from store.erasure.copies import erase
from store.errors import EmbeddingError, StoreUnavailable
from store.state.ledger import Held
from worker.metrics.series import stage
from worker.pipeline.batch import BatchResult, Leftovers, Planned, WriteCheck, storable
from worker.pipeline.core import Pipeline, Ready

__all__ = ["Indexer"]

log = logging.getLogger(__name__)


class Indexer:
    """Keeps one generation's chunks equal to its source, a batch of record ids at a time."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    def index(
        self,
        ids: Sequence[str],
        *,
        leftovers: Leftovers | None = None,
        fresh: bool = False,
        lane: RunLane | None = None,
    ) -> BatchResult:
        """Bring the chunks of ``ids`` in line with the source's current state.

        With ``leftovers`` (a bulk batch of a pooled run) only whole provider calls are made: a partly filled
        last call is first filled with records ``leftovers`` holds, and what still does not fill one is left
        there (``BatchResult.deferred``) for a later batch, instead of costing a call of its own.

        ``fresh``: the ledger held none of ``ids`` when the fan-out looked (a first load), so it is not read
        again to skip unchanged records. That is safe, because that read only ever saves work: every record
        is then planned as changed, and its write still happens under its lock after the source is read
        again, so a record another task indexed meanwhile is written once more as the source holds it (its
        texts are cache hits: no provider call), never left stale. Pushed records are never fresh.

        With ``lane`` (a batch of a batch-lane run) the vectors its run's provider jobs brought back are used as
        stored ones; while the run gathers, a batch with texts nothing holds queues them and writes nothing
        (``BatchResult.waiting``): it is sent again once they are answered.
        """
        pipeline, result = self.pipeline, BatchResult()
        ids = storable(list(dict.fromkeys(str(i) for i in ids)), result, max_chars=pipeline.limits.max_id_chars)
        with stage("load"):
            planned = self._load(ids, result, fresh=fresh)
            reuse = pipeline.reuse(fresh=fresh)
            if lane is not None:
                reuse = lane.reuse(reuse, pipeline.embeddings.space)
                if lane.gathers(pipeline.embeddings.space) and self._queued(planned, lane, reuse):
                    result.waiting = True
                    return result
            if leftovers is not None and planned:
                planned += self._fill_up(planned, leftovers, set(ids), result, reuse)
        with stage("embed"):
            if leftovers is None:
                ready = pipeline.embed(planned, result, reuse)
            else:
                ready = self._embed_whole(planned, result, leftovers, reuse)
        with stage("write"):
            pipeline.swap(ready, result, check=WriteCheck(self._same_in_source))
        return result

    def _queued(self, planned: list[Planned], lane: RunLane, reuse: Reuse) -> bool:
        """Queue the texts of ``planned`` that nothing holds in ``lane``; whether there were any."""
        embeddings, scope = self.pipeline.embeddings, self.pipeline.cache_scope
        wanted = embeddings.uncached([t for p in planned for t in p.texts], reuse=reuse, scope=scope)
        if wanted:
            lane.queue(embeddings.space, wanted)
        return bool(wanted)

    def _load(self, ids: list[str], result: BatchResult, *, fresh: bool = False) -> list[Planned]:
        """Read ``ids``, delete the chunks of those gone, and plan the rest (unchanged ones are skipped, unless
        ``fresh``: see ``index``)."""
        current = self.pipeline.fetch(ids, result)
        self._delete_gone([i for i in ids if i not in current and i not in result.failed], result)
        return self.pipeline.plan(list(current.values()), result, entries={} if fresh else None)

    def _fill_up(
        self, planned: list[Planned], leftovers: Leftovers, own: set[str], result: BatchResult, reuse: Reuse | None
    ) -> list[Planned]:
        """More records, from ``leftovers``, whose texts fill the batch's last provider call up (in
        ``result.claimed``: their own batches count them)."""
        embeddings = self.pipeline.embeddings
        texts = embeddings.uncached([t for p in planned for t in p.texts], reuse=reuse, scope=self.pipeline.cache_scope)
        short = -len(texts) % embeddings.call_size
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
    ) -> Ready:
        """Embed in whole provider calls; the records of the partly filled last one go to ``leftovers``. On a
        failure, as ``Pipeline.embed`` (each record alone); when ``leftovers`` cannot take them, they are embedded
        now."""
        pipeline = self.pipeline
        try:
            found, _ = pipeline.embeddings.embed_whole_calls(
                [t for p in planned for t in p.texts], reuse=reuse, scope=pipeline.cache_scope
            )
        except EmbeddingError:
            return pipeline.embed(planned, result, reuse)
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
                ready += pipeline.embed(waiting, result, reuse)
        return ready

    def _delete_gone(self, gone: list[str], result: BatchResult) -> None:
        if not gone:
            return
        pipeline = self.pipeline
        with pipeline.ledger.locked(pipeline.name, gone) as held:
            still_gone = [i for i in gone if i not in pipeline.source.fetch(gone)]
            if still_gone:
                erase(pipeline.collection, still_gone, cache=pipeline.embeddings.cache, scope=pipeline.cache_scope)
                held.forget(still_gone)
        result.deleted.extend(still_gone)
        result.superseded.extend(i for i in gone if i not in still_gone)

    def _same_in_source(self, ids: Sequence[str], held: Held) -> Callable[[Planned], bool]:
        """Read records: a result is current when the source, read again under the locks, hashes the same."""
        now = self.pipeline.fetch(list(ids), BatchResult())

        def current(plan: Planned) -> bool:
            fresh = now.get(plan.record.id)
            if fresh is not None and fresh == plan.read:  # read again as it was read: the same content
                return True
            try:
                return fresh is not None and self.pipeline.content_hash(fresh) == plan.hash
            except Exception:  # changed into something that cannot be indexed: its own task says why
                return False

        return current
