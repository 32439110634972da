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
from store.embeddings.cache import cache_scope
from store.plan.report import Judged, Plan
from store.plan.tally import Tally, pools
from store.state.generations.base import parse_name

if TYPE_CHECKING:
    from store.embeddings import Embeddings, Reuse
    from store.settings import ModelSettings, Settings
    from store.state.ledger import Ledger

__all__ = ["PAGE", "Caps", "PlanReader", "Stored", "Target", "plan"]

#: Records read and judged at once, and ledger entries counted at once.
PAGE = 1000
#: A run's caps: its ``max_tokens`` and ``max_cost``, each None where it names none.
Caps = tuple[int | None, float | None]
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
    """Reads and judges a collection's records as a worker's run would (``worker.repair.plan_reading.PlanReading``)."""

    def target(self, collection: str, *, chain: Sequence[str] | None) -> Target:
        """The run ``reindex`` (``chain`` None) or ``migrate --chain`` would start. Raises ConfigError."""
        ...


def plan(
    settings: Settings,
    ledger: Ledger,
    collection: str,
    *,
    reader: PlanReader,
    chain: Sequence[str] | None = None,
    caps: Caps = (None, None),
) -> Plan:
    """The plan of a reindex of ``collection`` (or, with ``chain``, of its migration to that chain), capped at
    ``caps``, its ``max_tokens`` and ``max_cost`` (each None: the collection's ``[budget]``, as the run's). Reads
    the source, the ledger, the store and the cache; calls no provider and writes nothing. ``settings`` and
    ``ledger``: the ones the run would read (a ``store.Client``'s)."""
    started = time.perf_counter()
    target = reader.target(collection, chain=chain)
    counter, embeddings = token_counter(target.model), target.embeddings
    declared = settings.collections.get(parse_name(collection)[0])
    scope = cache_scope(declared, collection) if declared is not None else parse_name(collection)[0]
    report = _report(target, collection, counter.counted_by, _caps(settings, collection, caps))
    tally = Tally(
        embeddings.call_size,
        embeddings.chain.limits,
        counter.count,
        pooled=report.pooled,
        cached=embeddings.cache is not None,
    )
    known, batch, fresh = 0, [], True
    for page in target.pages(PAGE):
        report.add(page)
        known += page.known
        for record in page.texts:
            batch.append(record)
            fresh = fresh and page.fresh
            if len(batch) >= target.batch_size:
                _judge_batch(batch, report, tally, embeddings, target.stored(fresh), scope)
                batch, fresh = [], True
    _judge_batch(batch, report, tally, embeddings, target.stored(fresh), scope)
    tally.count()
    report.gone = max(_held(ledger, target.generation) - known, 0)
    report.embed, report.tokens, report.calls = tally.texts, tally.tokens, tally.calls
    if report.price_per_million_tokens is not None:
        report.cost = report.tokens * report.price_per_million_tokens / 1e6
    lane = target.model.batch
    if lane is not None:
        report.batch_wait_hours = lane.max_wait_hours
        report.batch_price_per_million_tokens = lane.price_per_million_tokens
        if lane.price_per_million_tokens is not None:
            report.batch_cost = report.tokens * lane.price_per_million_tokens / 1e6
    report.rate_limited_seconds = _rate_limited(target.model, calls=tally.calls, estimated=tally.estimated)
    report.notes += _cap_notes(report)
    report.seconds = time.perf_counter() - started
    return report


def _caps(settings: Settings, collection: str, caps: Caps) -> Caps:
    """The run's caps, as its batches take them: each its own where it names one, else its collection's
    ``[collections.NAME.budget]``."""
    max_tokens, max_cost = caps
    declared = settings.collections.get(collection)
    if declared is None:
        return max_tokens, max_cost
    budget = declared.budget
    return (
        budget.max_tokens if max_tokens is None else max_tokens,
        budget.max_cost if max_cost is None else max_cost,
    )


def _report(target: Target, collection: str, counted_by: str, caps: Caps) -> Plan:
    """The plan's report before anything is counted: what the run writes, with what, under which caps, and so
    whether it pools (``pools``, the fan-out's rule: a pool in the cache's Redis, and no cap)."""
    max_tokens, max_cost = caps
    return Plan(
        collection=collection,
        generation=target.generation,
        kind=target.kind,
        entry=target.entry,
        model=target.model.model,
        counted_by=counted_by,
        price_per_million_tokens=target.model.price_per_million_tokens,
        pooled=pools(pool=target.embeddings.cache is not None, max_tokens=max_tokens, max_cost=max_cost),
        max_tokens=max_tokens,
        max_cost=max_cost,
    )


def _cap_notes(report: Plan) -> list[str]:
    """What the caps change: each batch packs its own calls, and a cap the run would reach pauses it there."""
    notes = []
    if report.max_tokens is not None or report.max_cost is not None:
        notes.append("capped: the run pools no leftovers, so each batch packs its own provider calls")
    if report.max_tokens is not None and report.tokens > report.max_tokens:
        notes.append(f"the run would pause at its cap of {report.max_tokens:,} tokens (it needs {report.tokens:,})")
    if report.max_cost is not None and report.cost is not None and report.cost > report.max_cost:
        notes.append(f"the run would pause at its cap of {report.max_cost:g} (it would cost {report.cost:g})")
    if report.max_cost is not None and report.price_per_million_tokens is None:
        notes.append(
            f"a cost cap counts nothing of {report.entry}, which declares no price: declare [models.{report.entry}] "
            "price_per_million_tokens, or cap the run with --max-tokens (reindex --max-cost refuses it)"
        )
    return notes


def _judge_batch(
    batch: list[tuple[str, list[str]]], report: Plan, tally: Tally, embeddings: Embeddings, stored: Reuse, scope: str
) -> None:
    """One batch task's records: their distinct texts, less those the cache or the store hold, to the tally."""
    if not batch:
        return
    texts = list(dict.fromkeys(t for _, chunks in batch for t in chunks))
    report.chunks += sum(len(chunks) for _, chunks in batch)
    missing = set(embeddings.uncached(texts, scope=scope))  # the collection's own cache: never another's texts
    report.cached += len(texts) - len(missing)
    held = set(stored(sorted(missing))) if missing else set()
    report.reused += len(held)
    tally.add([t for t in texts if t in missing and t not in held])


def _held(ledger: Ledger, generation: str) -> int:
    """The records the ledger holds for ``generation`` (tombstones left out), counted a page at a time."""
    held, after = 0, None
    while entries := ledger.entries_page(generation, after=after, limit=PAGE * 10):
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
