"""A run's leftover pool on a real Redis: claims fill a call or take nothing, belong to one owner until
settled or released, and every key expires."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from store.contract import POOL_KEY_PREFIX
from worker.pipeline.leftovers import LeftoverPool


@pytest.fixture
def pool(scratch_redis_url: str) -> Iterator[LeftoverPool]:
    redis.Redis.from_url(scratch_redis_url).flushdb()
    made = LeftoverPool.from_url(scratch_redis_url)
    assert made is not None
    yield made
    made.close()


def test_a_claim_fills_the_call_or_takes_nothing(pool: LeftoverPool) -> None:
    pool.defer("r1", {"a": 3, "b": 4})
    assert pool.claim("r1", "7", texts=8) == {}  # 7 texts cannot fill 8: the records stay for a later batch
    pool.defer("r1", {"c": 5})
    taken = pool.claim("r1", "7", texts=8)
    assert sum(taken.values()) >= 8 and set(taken) <= {"a", "b", "c"}
    assert pool.claim("r1", "8", texts=1) == {k: v for k, v in {"a": 3, "b": 4, "c": 5}.items() if k not in taken}
    assert pool.claim("r2", "7", texts=1) == {}  # another run's pool is another pool


def test_a_claim_is_its_owners_until_settled_or_released(pool: LeftoverPool) -> None:
    pool.defer("r1", {"a": 3, "b": 4})
    taken = pool.claim("r1", "7", texts=0)  # 0: everything
    assert taken == {"a": 3, "b": 4}
    assert pool.others("r1", "7") is False and pool.others("r1", "pool") is True  # 7's claim is open
    assert pool.claim("r1", "7", texts=50) == taken  # a later attempt of 7 gets its own claim back
    assert pool.release("r1", "7") == 2
    assert pool.others("r1", "pool") is True  # back in the pool
    assert pool.claim("r1", "pool", texts=0) == taken
    assert pool.settle("r1", "pool", ["a", "b"]) == 0
    assert pool.others("r1", "x") is False and pool.claim("r1", "x", texts=0) == {}


def test_what_a_claimer_gives_back_is_for_the_pool_batch_alone_and_an_unknown_claim_stays(pool: LeftoverPool) -> None:
    pool.defer("r1", {"a": 3, "b": 4, "c": 5})
    assert set(pool.claim("r1", "7", texts=7)) == {"a", "b"}
    assert pool.settle("r1", "7", ["a"], back=["b"]) == 0  # a written; b could not be indexed
    assert pool.claim("r1", "8", texts=1) == {"c": 5}  # b waits at 0 texts, which no claimer takes
    assert pool.settle("r1", "8", []) == 1  # 8 heard of nothing it claimed: its claim stays open
    assert pool.others("r1", "pool") is True
    assert pool.take_over("r1", "pool") == {"b": 0, "c": 5}  # the pool batch takes the pool and every claim
    assert pool.settle("r1", "pool", ["b", "c"]) == 0 and pool.others("r1", "pool") is False


def test_every_key_expires(pool: LeftoverPool, scratch_redis_url: str) -> None:
    pool.defer("r1", {"a": 3, "b": 4, "c": 1})
    pool.claim("r1", "7", texts=4)
    client = redis.Redis.from_url(scratch_redis_url)
    keys = client.keys(f"{POOL_KEY_PREFIX}r1*")
    assert len(keys) == 3 and all(0 < client.ttl(key) <= pool.ttl for key in keys)
    client.close()


def test_an_unreachable_redis_is_store_unavailable() -> None:
    from store.errors import StoreUnavailable

    dead = LeftoverPool.from_url("redis://127.0.0.1:1/0")
    assert dead is not None
    with pytest.raises(StoreUnavailable, match="leftover pool"):
        dead.defer("r1", {"a": 1})
    assert LeftoverPool.from_url("memory://") is None and LeftoverPool.from_url(None) is None


def test_the_pool_batch_takes_over_claims_whose_owner_may_be_gone(pool: LeftoverPool) -> None:
    pool.defer("r1", {"a": 3, "b": 4, "c": 2})
    pool.claim("r1", "7", texts=3)  # batch 7 claimed some, then (say) its worker died
    assert pool.others("r1", "pool") is True
    assert pool.take_over("r1", "pool") == {"a": 3, "b": 4, "c": 2}  # its claim and what was left, now ours
    pool.settle("r1", "pool", ["a", "b", "c"])
    assert pool.others("r1", "pool") is False and pool.claim("r1", "7", texts=0) == {}
