"""A capped run's tally (issue 48, defect 8): a run pools only with a pool to reach and no cap, and one that does
not pool but caches packs each batch's calls alone while buying a text only once in the run."""

from __future__ import annotations

import pytest

from store.embeddings.providers.base import Limits
from store.plan.costing import _cap_notes
from store.plan.report import Plan
from store.plan.tally import Tally, pools


@pytest.mark.parametrize(
    ("pool", "max_tokens", "max_cost", "pooled"),
    [(True, None, None, True), (True, 100, None, False), (True, None, 0.5, False), (False, None, None, False)],
)
def test_a_run_pools_only_with_a_pool_and_no_cap(
    pool: bool, max_tokens: int | None, max_cost: float | None, pooled: bool
) -> None:
    assert pools(pool=pool, max_tokens=max_tokens, max_cost=max_cost) is pooled


def test_a_cached_unpooled_tally_packs_each_batch_alone_and_buys_a_text_once() -> None:
    tally = Tally(3, Limits(), lambda text: 1, pooled=False, cached=True)
    tally.add(["a", "b"])
    tally.add(["b", "c", "d", "e"])  # "b" is a cache hit: "c", "d", "e" fill one call of this batch's own
    tally.add(["a"])  # bought already: no call
    tally.add(["f"])
    assert (tally.count().texts, tally.tokens, tally.calls) == (6, 6, 3)
    pooled = Tally(3, Limits(), lambda text: 1, pooled=True)
    for texts in (["a", "b"], ["b", "c", "d", "e"], ["a"], ["f"]):
        pooled.add(texts)
    assert (pooled.count().texts, pooled.calls) == (6, 2)  # the same texts, every call full


def test_a_capped_plan_says_where_its_caps_would_pause_or_count_nothing() -> None:
    plan = Plan(collection="notes", generation="notes", kind="reindex", entry="m", model="m", tokens=500)
    assert _cap_notes(plan) == []
    plan.max_tokens, plan.max_cost = 400, 1.0
    notes = _cap_notes(plan)
    assert notes[0].startswith("capped: the run pools no leftovers")
    assert "the run would pause at its cap of 400 tokens (it needs 500)" in notes
    assert any("a cost cap counts nothing of m, which declares no price" in note for note in notes)
