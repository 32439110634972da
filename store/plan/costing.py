"""A run's plan, made without calling a provider: the source read in pages and judged against the ledger as the
run's batches judge it (a ``PlanReader``, the worker's), each new and changed record's chunk texts looked up in
the embedding cache and the store, and the rest counted, packed into calls, priced and timed by the declared
rate limits."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from store.calls.tokens import token_counter
from store.plan.report import Judged, Plan
from store.plan.tally import Tally

if TYPE_CHECKING:
    from store.client import Client
    from store.embeddings import Embeddings, Reuse
    from store.settings import ModelSettings

__all__ = ["PAGE", "PlanReader", "Stored", "Target", "plan"]

#: Records read and judged at once, and ledger entries counted at once.
PAGE = 1000
#: The lookup of stored vectors one batch makes (``Indexer``'s): ``fresh`` for a first load's batch.
Stored = Callable[[bool], "Reuse"]


@dataclass(frozen=True, kw_only=True)
class Target:
    """What a run would write and embed with, and how its source is judged."""

    #: The generation the run writes (its ledger entries are judged against).
    generation: str
    kind: str
    #: The ``[models.NAME]`` entry first in the chain, and its settings.
    entry: str
    model: ModelSettings
    embeddings: Embeddings
    #: Records per batch task (``worker.batch_size``).
    batch_size: int
    #: Judged pages of the source, ``PAGE`` records at a time.
    pages: Callable[[int], Iterator[Judged]]
    #: Where a batch finds vectors already stored, as the run's batches look (``worker.pipeline``).
    stored: Stored


class PlanReader(Protocol):
    """Reads and judges a collection's records as a worker's run would (``worker.planning.PlanReading``)."""

    def target(self, collection: str, *, chain: Sequence[str] | None) -> Target:
        """The run ``reindex`` (``chain`` None) or ``migrate --chain`` would start. Raises ConfigError."""
        ...


def plan(client: Client, collection: str, *, reader: PlanReader, chain: Sequence[str] | None = None) -> Plan:
    """The plan of a reindex of ``collection`` (or, with ``chain``, of its migration to that chain). Reads the
    source, the ledger, the store and the cache; calls no provider and writes nothing."""
    started = time.perf_counter()
    target = reader.target(collection, chain=chain)
    counter = token_counter(target.model)
    embeddings = target.embeddings
    report = Plan(
        collection=collection,
        generation=target.generation,
        kind=target.kind,
        entry=target.entry,
        model=target.model.model,
        counted_by=counter.counted_by,
        price_per_million_tokens=target.model.price_per_million_tokens,
        pooled=embeddings.cache is not None,
    )
    tally = Tally(embeddings.call_size, embeddings.chain.limits, counter.count, pooled=report.pooled)
    known, batch, fresh = 0, [], True
    for page in target.pages(PAGE):
        report.add(page)
        known += page.known
        for record in page.texts:
            batch.append(record)
            fresh = fresh and page.fresh
            if len(batch) >= target.batch_size:
                _judge_batch(batch, report, tally, embeddings, target.stored(fresh))
                batch, fresh = [], True
    _judge_batch(batch, report, tally, embeddings, target.stored(fresh))
    tally.count()
    report.gone = max(_held(client, target.generation) - known, 0)
    report.embed, report.tokens, report.calls = tally.texts, tally.tokens, tally.calls
    if report.price_per_million_tokens is not None:
        report.cost = report.tokens * report.price_per_million_tokens / 1e6
    report.rate_limited_seconds = _rate_limited(target.model, calls=tally.calls, estimated=tally.estimated)
    report.seconds = time.perf_counter() - started
    return report


def _judge_batch(
    batch: list[tuple[str, list[str]]], report: Plan, tally: Tally, embeddings: Embeddings, stored: Reuse
) -> None:
    """One batch task's records: their distinct texts, less those the cache or the store hold, to the tally."""
    if not batch:
        return
    texts = list(dict.fromkeys(t for _, chunks in batch for t in chunks))
    report.chunks += sum(len(chunks) for _, chunks in batch)
    missing = set(embeddings.uncached(texts))
    report.cached += len(texts) - len(missing)
    held = set(stored(sorted(missing))) if missing else set()
    report.reused += len(held)
    tally.add([t for t in texts if t in missing and t not in held])


def _held(client: Client, generation: str) -> int:
    """The records the ledger holds for ``generation`` (tombstones left out), counted a page at a time."""
    held, after = 0, None
    while entries := client.ledger.entries_page(generation, after=after, limit=PAGE * 10):
        held += sum(1 for entry in entries if entry.content_hash)
        after = entries[-1].record_id
    return held


def _rate_limited(model: ModelSettings, *, calls: int, estimated: int) -> float | None:
    """The least time the model's declared limits let ``calls`` calls of ``estimated`` tokens take (the limiter
    counts the estimate); None when none is declared."""
    limits = [
        amount / per_minute * 60
        for amount, per_minute in ((calls, model.requests_per_minute), (estimated, model.tokens_per_minute))
        if per_minute
    ]
    return max(limits) if limits else None
