"""A first load's batches do not read the ledger (``Indexer.index(fresh=True)``): the fan-out found none of
their ids in it. That read only ever saves work, so skipping it leaves the same store, even when another task
indexed one of the records meanwhile, and a record indexed twice costs no second provider call (cache hits)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from store.state.ledger import MemoryLedger
from tests.unit.worker.pipeline.test_indexer_leftovers import RECORDS, calls, expected, indexer, stored, text
from worker.pipeline.indexer import Indexer
from worker.pipeline.sweeper import Sweeper
from worker.runs.fanout import fan_out


@pytest.fixture(autouse=True)
def records() -> None:
    rng = random.Random(31)
    RECORDS.clear()
    RECORDS.update({f"{i:04d}": {"id": f"{i:04d}", "text": text(rng)} for i in range(200)})


def counting_reads(made: Indexer) -> list[list[str]]:
    reads: list[list[str]] = []
    ledger: MemoryLedger = made.pipeline.ledger  # type: ignore[assignment]
    entries = ledger.entries

    def counted(collection: str, ids: Any) -> Any:
        reads.append(list(ids))
        return entries(collection, ids)

    ledger.entries = counted  # type: ignore[method-assign]
    return reads


def test_a_fresh_batch_reads_no_ledger_and_leaves_the_same_store_as_a_plain_one() -> None:
    made = indexer()
    ids = sorted(RECORDS)
    live = ids[7]
    made.index([live])  # a live task indexed this one after the fan-out looked
    RECORDS[ids[9]]["text"] = "changed after the fan-out looked"
    made.index([ids[9]])
    RECORDS[ids[9]]["text"] = "and changed again"
    reads, before = counting_reads(made), calls(made)
    result = made.index(ids[:100], fresh=True)
    assert reads == []  # the plan read nothing from the ledger
    assert sorted(result.indexed) == ids[:100] and result.skipped == []  # every record planned as changed
    assert stored(made) == {k: v for k, v in expected(made).items() if k.split(":")[0] in ids[:100]}
    plain = indexer()
    plain.pipeline.embeddings.cache = made.pipeline.embeddings.cache
    plain.pipeline.cache_scope = made.pipeline.cache_scope  # the same collection's scope
    plain.index(ids[:100])
    assert stored(plain) == stored(made)
    assert calls(plain) == 0  # every text cached already: indexing a record again costs no call
    assert calls(made) - before > 0


def test_the_fan_out_sends_only_pages_the_ledger_holds_nothing_of_as_fresh() -> None:
    made = indexer()
    source: Any = made.pipeline.source
    source.page_stamps = lambda after, limit: [(i, "") for i in sorted(RECORDS) if after is None or i > after][:limit]
    sent: dict[str, list[list[str]]] = {"plain": [], "fresh": []}
    fan_out(
        Sweeper(made.pipeline),
        batch_size=50,
        send=lambda ids, n: sent["plain"].append(ids),
        fresh=lambda ids, n: sent["fresh"].append(ids),
    )
    assert sent["plain"] == [] and [i for p in sent["fresh"] for i in p] == sorted(RECORDS)  # a first load
    for page in sent["fresh"]:
        made.index(page, fresh=True)
    RECORDS.update({f"{i:04d}": {"id": f"{i:04d}", "text": text(random.Random(i))} for i in range(200, 260)})
    RECORDS["0003"]["text"] = "edited"
    sent = {"plain": [], "fresh": []}
    fan_out(
        Sweeper(made.pipeline),
        batch_size=50,
        send=lambda ids, n: sent["plain"].append(ids),
        fresh=lambda ids, n: sent["fresh"].append(ids),
    )
    # The changed record and the first new ones share a batch, which reads the ledger; the rest are all new.
    assert sent["plain"] == [["0003", *(f"{i:04d}" for i in range(200, 249))]]
    assert sent["fresh"] == [[f"{i:04d}" for i in range(249, 260)]]
