"""Capped runs' totals in a real Redis: one Lua script checks and reserves, so processes racing for the last
tokens of a cap never pass it together; settled to what the calls used; refused, not passed, without Redis."""

from __future__ import annotations

import multiprocessing
import uuid

import pytest
import redis

from store.broker.reservations import Reservations
from store.calls import caps, spend
from store.calls.caps import Budget
from store.calls.spend import Meter, Spent
from store.contract import RESERVED_KEY_PREFIX
from store.errors import BudgetExceeded, StoreUnavailable


@pytest.fixture
def run_id(redis_url: str):  # type: ignore[no-untyped-def]
    run = f"test-{uuid.uuid4()}"
    yield run
    client = redis.Redis.from_url(redis_url)
    client.delete(f"{RESERVED_KEY_PREFIX}{run}")
    client.close()


def test_a_total_starts_from_the_seed_refuses_past_a_cap_and_is_settled(redis_url: str, run_id: str) -> None:
    shared = Reservations.from_url(redis_url)
    assert shared is not None
    try:
        caps = (100, 1.0)
        assert shared.reserve(run_id, seed=Spent(tokens=60, cost=0.5), call=(30, 0.3), caps=caps) is None
        assert shared.used(run_id) == Spent(tokens=90, cost=pytest.approx(0.8))
        # a later seed is ignored: the total already counts every process's calls
        assert shared.reserve(run_id, seed=Spent(), call=(11, None), caps=caps) == ("max_tokens", 90.0)
        assert shared.reserve(run_id, seed=Spent(), call=(5, 0.25), caps=caps) == ("max_cost", pytest.approx(0.8))
        shared.settle(run_id, tokens=-20, cost=-0.3)  # the call used 10 tokens and cost nothing
        assert shared.used(run_id) == Spent(tokens=70, cost=pytest.approx(0.5))
        assert shared.reserve(run_id, seed=Spent(), call=(30, None), caps=(100, None)) is None  # at the cap
        assert 0 < shared.client.ttl(f"{RESERVED_KEY_PREFIX}{run_id}") <= 86_400
    finally:
        shared.close()


def _race(redis_url: str, run_id: str, calls: int, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    shared = Reservations.from_url(redis_url)
    assert shared is not None
    budget = Budget(spent=Spent(), max_tokens=300, shared=(shared, run_id))
    taken = 0
    for _ in range(calls):
        try:
            with caps.capped(budget), caps.reserved(Meter(), ["abcd" * 7]):  # 7 tokens a call
                spend.add("m", tokens=7, cost=None, counted_by="estimate")
            taken += 7
        except BudgetExceeded:
            pass
    shared.close()
    queue.put(taken)


def test_processes_racing_for_a_cap_never_pass_it_together(redis_url: str, run_id: str) -> None:
    queue: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
    racers = [multiprocessing.Process(target=_race, args=(redis_url, run_id, 25, queue)) for _ in range(4)]
    for racer in racers:
        racer.start()
    taken = sum(queue.get(timeout=60) for _ in racers)
    for racer in racers:
        racer.join(timeout=10)
    assert taken == 294  # 42 calls of 7 out of 100 asked: the 43rd would pass 300, whichever process asked
    shared = Reservations.from_url(redis_url)
    assert shared is not None and shared.used(run_id) == Spent(tokens=294, cost=0.0)
    shared.close()


def test_a_call_that_fails_gives_its_reservation_back(redis_url: str, run_id: str) -> None:
    shared = Reservations.from_url(redis_url)
    assert shared is not None
    budget = Budget(spent=Spent(tokens=5), max_tokens=50, shared=(shared, run_id))
    with pytest.raises(RuntimeError), caps.capped(budget), caps.reserved(Meter(), ["abcd" * 10]):
        raise RuntimeError("the provider failed: nothing spent")
    assert shared.used(run_id) == Spent(tokens=5, cost=0.0)
    shared.close()


def test_without_its_redis_a_capped_call_is_refused_and_without_a_redis_there_is_no_shared_total() -> None:
    assert Reservations.from_url("amqp://guest@localhost//") is None
    gone = Reservations.from_url("redis://127.0.0.1:1/0")  # nothing listens on port 1
    assert gone is not None
    budget = Budget(spent=Spent(), max_tokens=50, shared=(gone, "r1"))
    refused = pytest.raises(StoreUnavailable, match=r"^the budget of run r1 in Redis: .*; its capped batches wait")
    with refused, caps.capped(budget), caps.reserved(Meter(), ["abcd"]):
        pass
    gone.settle("r1", tokens=-1, cost=0.0)  # logged: the reservation stays, erring toward the cap
    gone.close()
