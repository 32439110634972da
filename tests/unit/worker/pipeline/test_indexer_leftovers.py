"""Batches that leave a partly filled last provider call to later batches (``Indexer.index(leftovers=...)``).

One process: memory store and ledger, fake embeddings behind a fakeredis cache, and an in-memory pool with
the semantics of ``worker.pipeline.leftovers.RunPool`` (a claim takes records only when they fill the call). Provider
calls are counted by the chain's own counter, and every call but the last must be full.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping
from typing import Any

import fakeredis
import pytest

from store.embeddings import Embeddings
from store.embeddings.cache import EmbeddingCache
from store.settings import Settings
from store.state.ledger import MemoryLedger
from store.vectors.backends import memory_store
from tests.backends import unique_name
from worker.pipeline.batch import BatchResult
from worker.pipeline.chunker import Chunker
from worker.pipeline.core import Pipeline, Recipe
from worker.pipeline.indexer import Indexer
from worker.sources.python import PythonSource

CALL = 16
WORDS = ["onboarding", "rollout", "invoice", "renewal", "pricing", "discount", "contract", "meeting", "churn"]
RECORDS: dict[str, dict[str, Any]] = {}


def load_records(ids: list[str] | None) -> Iterable[dict[str, Any]]:
    return [r for key, r in RECORDS.items() if ids is None or key in ids]


class MemoryPool:
    """``RunPool``'s semantics in a dict: records and the texts each still needs."""

    def __init__(self) -> None:
        self.pending: dict[str, int] = {}

    def claim(self, texts: int) -> dict[str, int]:
        if sum(self.pending.values()) < texts:
            return {}
        taken: dict[str, int] = {}
        for record_id in list(self.pending):
            if sum(taken.values()) >= texts:
                break
            taken[record_id] = self.pending.pop(record_id)
        return taken

    def defer(self, pending: Mapping[str, int]) -> None:
        self.pending.update(pending)


def text(rng: random.Random) -> str:
    return " ".join(f"{rng.choice(WORDS)} {rng.randrange(10_000)}" for _ in range(rng.randint(3, 30)))


def indexer() -> Indexer:
    settings = Settings.model_validate(
        {"vectors": {"store": "memory", "dimensions": 16}, "embeddings": {"cache_ttl_days": 0, "batch_size": CALL}}
    )
    embeddings = Embeddings.from_settings(settings)
    embeddings.cache = EmbeddingCache(fakeredis.FakeRedis(), ttl_seconds=3600)
    name = unique_name()
    store = memory_store(dimensions=16)
    pipeline = Pipeline(
        name=name,
        collection=store.get_collection(name, create=True),
        source=PythonSource(loader=f"{__name__}:load_records"),
        recipe=Recipe(Chunker(max_tokens=8, overlap=2), embeddings),
        ledger=MemoryLedger(),
    )
    return Indexer(pipeline)


def calls(indexer: Indexer) -> int:
    return sum(indexer.pipeline.embeddings.stats.calls.values())


def chunk_texts(indexer: Indexer, ids: Iterable[str]) -> set[str]:
    return {c.text for i in ids for c in indexer.pipeline.chunker.split(RECORDS[i]["text"])}


def stored(indexer: Indexer) -> dict[str, str]:
    return {m.id: m.text for m in indexer.pipeline.collection.search([1.0] * 16, limit=10_000)}


def expected(indexer: Indexer) -> dict[str, str]:
    return {
        f"{i}:{n}": c.text for i, r in RECORDS.items() for n, c in enumerate(indexer.pipeline.chunker.split(r["text"]))
    }


def run_pooled(indexer: Indexer, pages: list[list[str]], pool: MemoryPool) -> list[BatchResult]:
    """Each page as a pooled batch, then the pool batch: everything left, embedded without leftovers."""
    results = [indexer.index(page, leftovers=pool) for page in pages]
    left = list(pool.pending)
    pool.pending.clear()
    return [*results, indexer.index(left)]


@pytest.fixture(autouse=True)
def records() -> None:
    rng = random.Random(23)
    RECORDS.clear()
    RECORDS.update({f"{i:04d}": {"id": f"{i:04d}", "text": text(rng)} for i in range(600)})


def test_pooled_batches_make_the_fewest_calls_and_count_every_record_once() -> None:
    made = indexer()
    ids = sorted(RECORDS)
    pool = MemoryPool()
    results = run_pooled(made, [ids[i : i + 50] for i in range(0, len(ids), 50)], pool)
    assert calls(made) == math.ceil(len(chunk_texts(made, ids)) / CALL)  # every call full but the last
    counted = [i for r in results for i in r.indexed]
    assert sorted(counted) == ids  # each record indexed (and counted) by exactly one batch
    assert any(r.deferred for r in results) and not pool.pending
    assert stored(made) == expected(made)


def test_without_leftovers_each_batch_ends_with_a_partly_filled_call() -> None:
    made = indexer()
    ids = sorted(RECORDS)
    for start in range(0, len(ids), 50):
        made.index(ids[start : start + 50])
    assert calls(made) > math.ceil(len(chunk_texts(made, ids)) / CALL)  # what leftovers are for
    assert stored(made) == expected(made)


def test_pages_with_one_changed_record_each_share_calls() -> None:
    """The issue's case: each page goes whole and holds one changed record; pooled, they fill calls together."""
    made = indexer()
    ids = sorted(RECORDS)
    pages = [ids[i : i + 50] for i in range(0, len(ids), 50)]
    run_pooled(made, pages, MemoryPool())
    edited = [page[0] for page in pages]
    rng = random.Random(5)
    for i in edited:
        RECORDS[i]["text"] = text(rng) + " edited"
    before = calls(made)
    results = run_pooled(made, pages, MemoryPool())
    assert calls(made) - before == math.ceil(len(chunk_texts(made, edited)) / CALL)
    assert sorted(i for r in results for i in r.indexed) == sorted(edited)
    assert sum(len(r.skipped) for r in results) == len(ids) - len(edited)
    assert stored(made) == expected(made)


def test_a_cache_hit_costs_no_call_and_a_stale_pooled_record_is_written_as_the_source_holds_it() -> None:
    made = indexer()
    ids = sorted(RECORDS)[:100]
    cut = next(n for n in range(40, 60) if len(chunk_texts(made, ids[:n])) % CALL)  # a partly filled last call
    pool = MemoryPool()
    first = made.index(ids[:cut], leftovers=pool)
    assert first.deferred  # left for a fuller call
    changed = first.deferred[0]
    RECORDS[changed]["text"] = "changed since its batch read it"
    second = made.index(ids[cut:], leftovers=pool)
    left = list(pool.pending)
    pool.pending.clear()
    made.index(left)
    assert {k: v for k, v in stored(made).items() if k.startswith(changed + ":")} == {
        k: v for k, v in expected(made).items() if k.startswith(changed + ":")
    }
    assert not set(first.deferred) & set(first.indexed)
    assert changed in second.indexed or changed in left  # taken by the next batch, or by the pool batch
    before = calls(made)
    again = indexer()
    again.pipeline.embeddings.cache = made.pipeline.embeddings.cache  # the same cache: every text is a hit
    again.pipeline.cache_scope = (
        made.pipeline.cache_scope
    )  # in the same collection's scope (another collection's would miss)
    pool = MemoryPool()
    for page in (ids[:cut], ids[cut:]):
        again.index(page, leftovers=pool)
    again.index(list(pool.pending))
    assert calls(again) == 0 and calls(made) == before


def test_a_live_record_makes_its_own_call_at_once_while_the_pool_holds_records() -> None:
    """index_record passes no leftovers: its texts go in its own call, never waiting on the pool or filling it."""
    made = indexer()
    ids = sorted(RECORDS)
    pool = MemoryPool()
    made.index(ids[:45], leftovers=pool)
    waiting = dict(pool.pending)
    live = ids[300]
    result = made.index([live])
    assert result.indexed == [live] and result.deferred == []
    own = math.ceil(len(chunk_texts(made, [live])) / CALL)
    assert calls(made) - math.floor(len(chunk_texts(made, ids[:45])) / CALL) == own  # its own calls, at once
    assert pool.pending == waiting  # the pool neither gave nor took
