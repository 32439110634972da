"""Records judged for ``vectorsync reindex --plan`` and ``migrate --plan`` as a run's batches judge them: the
fan-out's rule picks the ids to read (``worker.runs.fanout.changed_ids``), each read record is hashed and chunked by
the pipeline of the generation the run writes, and nothing is embedded or written (``store.plan`` does the sums)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from store.client import Client
from store.embeddings import Embeddings
from store.embeddings.chain import resolve_entries
from store.errors import ConfigError
from store.plan import Judged, Target
from store.plan.costing import Stored
from store.state.generations.base import generation_settings
from store.state.generations.migration import plan as migration
from store.vectors.records import clean_text
from store.vectors.stored import StoredVectors
from worker.pipeline.core import Pipeline, Recipe
from worker.pipeline.sweeper import Sweeper
from worker.runs.fanout import changed_ids
from worker.runtime.context import WorkerContext
from worker.sources.push import PushSource

__all__ = ["PlanReading", "judge"]


class PlanReading:
    """``store.plan.PlanReader`` over ``client``'s parts; ``close()`` releases what it opened (sources, a migration's
    embeddings) and leaves the client open."""

    def __init__(self, client: Client) -> None:
        self._context = WorkerContext.of(client)
        self._opened: list[Embeddings] = []

    def target(self, collection: str, *, chain: Sequence[str] | None) -> Target:
        live = self._context.pipeline(collection)
        if isinstance(live.source, PushSource):
            raise ConfigError(
                f"collection {collection!r} holds pushed documents: no source to plan a run from (the app sends "
                "each one; its index_document tasks embed only what changed)"
            )
        settings = self._context.settings
        generation = self._context.router.reading(collection)
        if chain is not None:
            registry = self._context.ledger.generations
            embedded = self._context.ledger.models(collection) if registry.alias(collection) is None else set()
            _, generation = migration(settings, registry, collection, list(chain), embedded=embedded)
        generated = generation_settings(settings, generation)
        entry, model = resolve_entries(generated)[0]
        pipeline = (
            live if chain is None else self._building(live, generation.physical, Embeddings.from_settings(generated))
        )
        return Target(
            generation=generation.physical,
            kind="reindex" if chain is None else "migrate",
            entry=entry,
            model=model,
            embeddings=pipeline.embeddings,
            batch_size=settings.worker.batch_size,
            pages=lambda size: judge(Sweeper(pipeline), page_size=size),
            stored=pipeline.reuse if chain is None else self._copied(live, pipeline.embeddings),
        )

    def _building(self, live: Pipeline, name: str, embeddings: Embeddings) -> Pipeline:
        """A pipeline as the new generation ``name``'s would be (a migration changes the chain alone); its lookups
        go to the live collection, since nothing is written and the new one is not created."""
        self._opened.append(embeddings)
        return Pipeline(
            name=name,
            collection=live.collection,
            source=live.source,
            recipe=Recipe(live.chunker, embeddings),
            ledger=live.ledger,
            limits=live.limits,
        )

    @staticmethod
    def _copied(live: Pipeline, embeddings: Embeddings) -> Stored:
        """A migration's batches find vectors in the live generation when its vectors are of the same model and
        size (``worker.runtime.context`` sets ``Pipeline.replaces`` so); the new generation holds none yet."""
        same = live.embeddings.space == embeddings.space and live.embeddings.dimensions == embeddings.dimensions
        others = (lambda: [live.collection]) if same else tuple
        return lambda fresh: StoredVectors(None, model=embeddings.space, others=others)

    def close(self) -> None:
        for embeddings in self._opened:
            embeddings.close()
        self._context.close(client=False)

    def __enter__(self) -> PlanReading:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def judge(sweeper: Sweeper, *, page_size: int) -> Iterator[Judged]:
    """``sweeper``'s source a page at a time, each record judged as its batch would: new, changed (with its
    chunk texts), unchanged or failed."""
    pipeline = sweeper.pipeline
    after: str | None = None
    while stamped := pipeline.source.page_stamps(after=after, limit=page_size):
        after = stamped[-1][0]
        ids = [record_id for record_id, _ in stamped]
        known = pipeline.ledger.entries(pipeline.name, ids)
        page = Judged(known=sum(1 for entry in known.values() if entry.content_hash))
        read = changed_ids(sweeper, stamped)
        page.unchanged = len(stamped) - len(read)
        records = pipeline.source.fetch(read) if read else {}
        for record_id in read:
            record = records.get(record_id)
            if record is None:  # gone since the page was read: its batch deletes it
                continue
            try:
                digest = pipeline.content_hash(record)
            except Exception:  # the batch fails this record alone, saying why
                page.failed += 1
                continue
            entry = known.get(record_id)
            if entry is not None and pipeline.holds(entry, digest):
                page.unchanged += 1
                continue
            most = pipeline.limits.max_chunks_per_record
            texts = pipeline.chunker.texts(clean_text(record.text), limit=most + 1)  # cut no further than the batch
            if len(texts) > most:
                page.failed += 1
                continue
            if entry is not None and entry.content_hash:
                page.changed += 1
            else:
                page.new += 1
            page.texts.append((record_id, texts))
        yield page
