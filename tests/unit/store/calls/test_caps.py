"""A run's caps checked before each call: a budget refuses a call that would pass one, counted as providers
count; a shared total counts every process's calls; a batch's calls are reserved together, so a batch that meets
the cap buys none of them."""

from __future__ import annotations

import pytest

from store.calls import caps, spend
from store.calls.spend import Meter, total
from store.embeddings.batching import run_batches
from store.errors import BudgetExceeded


def test_a_budget_refuses_a_call_that_would_pass_a_cap_counting_spent_batch_and_in_flight_tokens() -> None:
    budget = caps.Budget(spent=spend.Spent(tokens=60, cost=0.5), max_tokens=100, max_cost=1.0)
    budget.reserve(20, 0.1, spend.Spent(tokens=10))  # 60 + 10 + 20 = 90
    with pytest.raises(BudgetExceeded) as refused:
        budget.reserve(11, None, spend.Spent(tokens=10))  # 90 + 11 > 100
    assert str(refused.value) == (
        "paused at its budget: max_tokens = 100, spent 90, 10 left, the next call needs 11; "
        "`vectorsync runs resume RUN --max-tokens N` continues it"
    )
    budget.release(20, 0.1)
    budget.reserve(30, None, spend.Spent(tokens=10))  # 60 + 10 + 30 = 100: at the cap, not past it
    with pytest.raises(BudgetExceeded, match="max_cost = 1, spent 0.9, 0.1 left"):
        caps.Budget(spent=spend.Spent(cost=0.9), max_cost=1.0).reserve(1, 0.2, spend.Spent())
    caps.Budget(spent=spend.Spent(cost=0.9), max_cost=1.0).reserve(10**9, None, spend.Spent())  # no price


def test_reserved_checks_calls_inside_a_capped_block_only_and_releases_them() -> None:
    meter = Meter()  # the estimate: four characters a token
    with caps.reserved(meter, ["x" * 4000]):
        pass  # no budget: never refused
    budget = caps.Budget(spent=spend.Spent(), max_tokens=10)
    with spend.tallied("r1"), caps.capped(budget):
        with caps.reserved(meter, ["abcd" * 10]):
            with pytest.raises(BudgetExceeded):
                _call(meter, ["abcd"])  # 10 in flight: one more is past the cap
            assert budget.max_tokens == 10
        _call(meter, ["abcd" * 10])  # released: 10 tokens fit again


def _call(meter: Meter, texts: list[str]) -> None:
    with caps.reserved(meter, texts):
        pass


class SharedTotal:
    """A run's total as ``store.broker.reservations`` keeps it in Redis, in this process."""

    def __init__(self) -> None:
        self.tokens: int | None = None
        self.settled: list[int] = []
        #: The tokens of each reservation asked for, refused or not.
        self.asked: list[int] = []

    def reserve(
        self, run_id: str, *, seed: spend.Spent, call: tuple[int, float | None], caps: tuple[int | None, float | None]
    ) -> tuple[str, float] | None:
        self.asked.append(call[0])
        used = seed.tokens if self.tokens is None else self.tokens
        if caps[0] is not None and used + call[0] > caps[0]:
            return "max_tokens", float(used)
        self.tokens = used + call[0]
        return None

    def settle(self, run_id: str, *, tokens: int, cost: float) -> None:
        assert self.tokens is not None
        self.tokens += tokens
        self.settled.append(tokens)


def test_a_shared_budget_counts_every_batchs_calls_in_its_shared_total_settled_to_what_they_used() -> None:
    shared, meter = SharedTotal(), Meter()
    first = caps.Budget(spent=spend.Spent(tokens=20), max_tokens=40, shared=(shared, "r1"))
    second = caps.Budget(spent=spend.Spent(tokens=0), max_tokens=40, shared=(shared, "r1"))  # an older snapshot
    with spend.tallied("r1"), caps.capped(first), caps.reserved(meter, ["abcd" * 10]):
        spend.add("m", tokens=8, cost=None, counted_by="provider")  # the provider counted 8, not 10
    assert (shared.tokens, shared.settled) == (28, [-2])
    with spend.tallied("r1"), caps.capped(second):  # its snapshot saw none of it: the shared total did
        with pytest.raises(BudgetExceeded, match=r"max_tokens = 40, spent 28, 12 left, the next call needs 13"):
            _call(meter, ["abcd" * 13])
        _call(meter, ["abcd" * 12])  # reserved 12, used nothing (no add): given back
    assert (shared.tokens, shared.settled) == (28, [-2, -12])


def test_prepaid_reserves_a_batchs_calls_together_so_one_that_meets_the_cap_is_refused_before_any_is_sent() -> None:
    """Issue 50: call by call, a batch of three calls bought two and was parked at the third; resumed, its run
    bought the two again (their vectors lost, with the cache off). Reserved together, it buys none."""
    shared, meter = SharedTotal(), Meter()
    budget = caps.Budget(spent=spend.Spent(tokens=0), max_tokens=40, shared=(shared, "r1"))
    calls = [["abcd" * 15], ["abcd" * 15], ["abcd" * 15]]  # 45 tokens: the first two calls alone would fit
    with spend.tallied("r1"), caps.capped(budget):
        refused = pytest.raises(BudgetExceeded, match=r"spent 0, 40 left, the batch's calls need 45; `vectorsync")
        with refused, caps.prepaid(meter, [text for call in calls for text in call]):
            pytest.fail("the block runs only once its calls are reserved")
        assert shared.asked == [45] and not shared.tokens
        calls = [["abcd" * 10], ["abcd" * 10], ["abcd" * 10]]
        with caps.prepaid(meter, [text for call in calls for text in call]):  # 30: reserved once
            for call in calls[:2]:  # the third is never sent (its batch failed): its 10 are given back
                with caps.reserved(meter, call):
                    spend.add("m", tokens=9, cost=None, counted_by="provider")
        assert shared.asked == [45, 30]  # the calls drew on the batch's reservation: no more round trips
        assert (shared.tokens, shared.settled) == (18, [-1, -1, -10])


def test_calls_in_threads_draw_on_their_prepaid_block_and_reserve_only_what_it_lacks() -> None:
    shared, meter = SharedTotal(), Meter()
    budget = caps.Budget(spent=spend.Spent(), max_tokens=100, shared=(shared, "r1"))
    with spend.tallied("r1") as tally, spend.charged_to("notes", 1), caps.capped(budget):
        _prepaid_calls(meter)
    assert shared.asked == [40, 12] and shared.tokens == 52 and total(tally.rows()).tokens == 52
    local = caps.Budget(spent=spend.Spent(), max_tokens=40)  # each process its own count
    with spend.tallied("r1"), spend.charged_to("notes", 1), caps.capped(local):
        with caps.prepaid(meter, ["abcd" * 10] * 4):
            run_batches([["abcd" * 10]] * 3, lambda call: _spent(meter, call), parallelism=3)
            with pytest.raises(BudgetExceeded):
                _call(meter, ["abcd" * 11])  # 30 spent, 10 still prepaid: 11 passes the cap
        _call(meter, ["abcd" * 10])  # the prepaid 10 given back: 10 fit again


def _prepaid_calls(meter: Meter) -> None:
    with caps.prepaid(meter, ["abcd" * 10] * 4):
        with caps.prepaid(meter, ["abcd"] * 99):  # inside another: draws on the outer one, reserves nothing
            run_batches([["abcd" * 10]] * 4, lambda call: _spent(meter, call), parallelism=4)
        _spent(meter, ["abcd" * 12])  # beyond the 40 prepaid: reserves its own 12


def _spent(meter: Meter, texts: list[str]) -> list[str]:
    """A call that used what it reserved."""
    with caps.reserved(meter, texts):
        spend.add("m", tokens=meter.counter.total(texts), cost=None, counted_by="estimate")
    return texts
