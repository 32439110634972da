"""Spend: a batch's tally by run, collection, model and generation, through parallel embedding threads."""

from __future__ import annotations

from typing import Any

import pytest

from store.calls import spend
from store.calls.spend import LIVE, UNMETERED, Meter, Spend, cost_of, weakest
from store.calls.tokens import token_counter
from store.embeddings.batching import run_batches
from store.settings import ModelSettings


def row(**changes: Any) -> Spend:
    values: dict[str, Any] = {
        "run_id": "r1",
        "collection": "notes",
        "model": "m",
        "generation": 1,
        "tokens": 10,
        "calls": 1,
        "cost": None,
        "counted_by": "provider",
    }
    return Spend(**{**values, **changes})


def test_cost_is_tokens_times_price_per_million_and_none_without_a_price() -> None:
    assert cost_of(1_500_000, 0.02) == pytest.approx(0.03)
    assert cost_of(0, 0.02) == 0
    assert cost_of(1_500_000, None) is None


def test_a_sum_keeps_the_weakest_label_and_a_cost_when_either_has_one() -> None:
    assert weakest("provider", "estimate") == "estimate"
    assert weakest("tokenizer", "provider") == "tokenizer"
    summed = row(cost=0.5).plus(row(tokens=5, counted_by="tokenizer"))
    assert (summed.tokens, summed.calls, summed.cost, summed.counted_by) == (15, 2, 0.5, "tokenizer")
    assert row().plus(row()).cost is None


def test_a_meter_takes_the_providers_count_else_its_counter() -> None:
    meter = Meter.of(
        ModelSettings(provider="openai", model="text-embedding-3-small", dimensions=8, price_per_million_tokens=2.0)
    )
    assert meter.measure(["tiktoken is great!"], 40) == (40, "provider", pytest.approx(80 / 1e6))
    assert meter.measure(["tiktoken is great!"], None) == (6, "tokenizer", pytest.approx(12 / 1e6))
    assert UNMETERED.measure(["x" * 9], None) == (3, "estimate", None)
    assert meter.counter == token_counter(
        ModelSettings(provider="openai", model="text-embedding-3-small", dimensions=8)
    )


def test_calls_in_parallel_threads_add_to_the_tally_of_the_block_that_made_them() -> None:
    def call(batch: list[int]) -> list[int]:
        spend.add("m", tokens=len(batch), cost=None, counted_by="estimate")
        return batch

    with spend.tallied("r1") as tally, spend.charged_to("notes", 2):
        assert run_batches([[1, 2], [3], [4, 5, 6]], call, parallelism=3) == [1, 2, 3, 4, 5, 6]
    assert tally.rows() == [row(generation=2, tokens=6, calls=3, counted_by="estimate")]


def test_calls_outside_a_tally_or_outside_a_charge_are_not_tallied() -> None:
    spend.add("m", tokens=5, cost=None, counted_by="provider")  # no tally: nothing to add to, nothing raised
    with spend.tallied(None) as tally:
        spend.add("m", tokens=5, cost=None, counted_by="provider")
        with spend.charged_to("notes", 1):
            spend.add("m", tokens=7, cost=1.0, counted_by="provider")
    assert tally.rows() == [row(run_id=LIVE, tokens=7, cost=1.0)]


def test_a_total_sums_tokens_calls_and_priced_costs_and_keeps_the_weakest_label() -> None:
    assert spend.total([]) == spend.Spent() and spend.total([]).cost is None
    summed = spend.total([row(tokens=3), row(tokens=4, calls=2, cost=0.5), row(generation=2, counted_by="estimate")])
    assert summed == spend.Spent(tokens=17, calls=4, cost=0.5, counted_by="estimate")
    assert summed.estimated and not spend.total([row()]).estimated
    assert spend.total([row(cost=None), row(cost=None)]).cost is None
