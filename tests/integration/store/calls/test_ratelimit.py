"""The shared rate limit against a real Redis: burst and refill, waiting, threads, the 429 penalty, Redis back."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from store.calls import ratelimit
from store.calls.ratelimit import Budget, RateLimiter, bucket_key
from store.embeddings import Embeddings
from store.embeddings.chain import FailoverChain
from store.retrieval import Retrieval
from store.settings import Settings
from store.vectors import VectorRecord
from store.vectors.backends import memory_store
from tests.fake_openai import FakeOpenAI, settings_for
from tests.services import free_port, redis_server


@pytest.fixture
def client(redis_url: str) -> Iterator[Any]:
    connection = redis.Redis.from_url(redis_url)
    yield connection
    connection.close()


@pytest.fixture
def limiter(client: Any) -> Iterator[Any]:
    """Makes limiters on a key of this test's own; deletes the keys afterwards."""
    keys: list[str] = []

    def make(**budget: Any) -> RateLimiter:
        keys.append(f"vectorsync-test:ratelimit:{uuid.uuid4().hex}")
        budget.setdefault("tokens_per_minute", None)
        return RateLimiter(client, name=f"m-{uuid.uuid4().hex[:8]}", key=keys[-1], budget=Budget(**budget))

    yield make
    if keys:
        client.delete(*keys)


def takes_until_refused(bucket: RateLimiter, **cost: Any) -> int:
    count = 0
    while bucket.take(**cost) == 0:
        count += 1
    return count


def takes_until_refused_or(bucket: RateLimiter, most: int) -> int:
    return next((count for count in range(most) if bucket.take() > 0), most)


def within_bucket(times: list[float], *, capacity: float, rate: float, slack: float = 1) -> list[str]:
    """Every stretch of grants that is more than a full bucket plus what refilled during it."""
    return [
        f"{j - i + 1} grants in {times[j] - times[i]:.3f}s"
        for i in range(len(times))
        for j in range(i, len(times))
        if j - i + 1 > capacity + rate * (times[j] - times[i]) + slack
    ]


def test_a_full_bucket_allows_a_burst_then_refills_at_the_rate(limiter: Any) -> None:
    bucket = limiter(requests_per_minute=600, burst_seconds=1)  # 10 a second, 10 at most at once
    assert takes_until_refused(bucket) == 10
    assert 0 < bucket.take() <= 0.1
    time.sleep(0.3)
    assert 2 <= takes_until_refused(bucket) <= 5


def test_tokens_are_a_budget_of_their_own_and_a_big_call_goes_when_the_bucket_is_full(limiter: Any) -> None:
    bucket = limiter(requests_per_minute=6000, tokens_per_minute=600, burst_seconds=1)  # 10 tokens at most
    assert bucket.take(tokens=4) == bucket.take(tokens=4) == 0
    assert 0.15 < bucket.take(tokens=4) <= 0.2
    big = limiter(tokens_per_minute=600, requests_per_minute=None, burst_seconds=1)
    assert big.take(tokens=50) == 0  # over the bucket: never forever, it goes when the bucket is full...
    assert 4.0 < big.take(tokens=1) <= 4.1  # ...and leaves it 40 tokens in debt


def test_acquire_waits_for_the_budget_and_counts_the_wait(limiter: Any) -> None:
    from prometheus_client import REGISTRY

    bucket = limiter(requests_per_minute=1200, burst_seconds=0.5)  # 20 a second, 10 at once
    started = time.monotonic()
    takes_until_refused(bucket)  # empty now (less than one request left): 4 more need 3/20 s at least
    waited = sum(bucket.acquire() for _ in range(4))
    elapsed = time.monotonic() - started
    # How much of that is waiting depends on how slowly this test ran (the bucket refills meanwhile): it
    # once waited 0.146 s of a needed 0.15 on a loaded machine. The refill rate bounds the whole.
    assert 0 < waited <= elapsed and elapsed >= 0.15
    labels = {"model": bucket.name}
    assert REGISTRY.get_sample_value("vectorsync_rate_limit_wait_seconds_count", labels) == 4
    assert REGISTRY.get_sample_value("vectorsync_rate_limit_wait_seconds_sum", labels) == pytest.approx(waited)


def test_threads_share_one_budget_atomically(limiter: Any) -> None:
    bucket = limiter(requests_per_minute=600, burst_seconds=1)
    granted: list[float] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(6):
            bucket.acquire()
            with lock:
                granted.append(time.monotonic())

    started = time.monotonic()
    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(granted) == 24
    assert time.monotonic() - started >= 1.3  # 10 at once, then 14 at 10 a second
    assert within_bucket(sorted(granted), capacity=10, rate=10) == []


def test_racing_takes_never_overdraw(limiter: Any) -> None:
    bucket = limiter(requests_per_minute=600, burst_seconds=1)
    granted = []

    def race() -> None:
        granted.extend(1 for _ in range(20) if bucket.take() == 0)

    started = time.monotonic()
    threads = [threading.Thread(target=race) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert 10 <= len(granted) <= 10 + 10 * (time.monotonic() - started) + 1


def test_a_429_empties_the_bucket_pauses_it_then_halves_the_rate(limiter: Any) -> None:
    bucket = limiter(requests_per_minute=600, burst_seconds=1)
    bucket.take()
    bucket.penalize(0.3)
    assert bucket.take() == pytest.approx(0.3 + 1 / 5, abs=0.05)  # the pause, then one request at half rate
    time.sleep(0.5)
    assert bucket.take() == 0
    assert bucket.take() == pytest.approx(1 / 5, abs=0.05)
    other = limiter(requests_per_minute=600, burst_seconds=1, max_pause=0.1)
    other.penalize(3600)  # a daily quota's Retry-After: the chain fails over; the bucket pauses max_pause
    assert other.take() == pytest.approx(0.1 + 1 / 5, abs=0.05)


def test_a_429_through_the_chain_shrinks_every_process_budget(redis_url: str) -> None:
    with FakeOpenAI() as server:
        settings = settings_for(
            server,
            models=[f"text-embedding-{uuid.uuid4().hex}"],
            cache_url=redis_url,
            model={"requests_per_minute": 600},
            max_wait_seconds=1.0,
        )
        chain, other_process = FailoverChain.from_settings(settings), FailoverChain.from_settings(settings)
        server.push(status=429, headers={"retry-after": "0.3"})
        chain.embed_batch(["renewal call"])
        first, second = server.arrivals()
        assert second - first >= 0.45  # Retry-After (0.3), then one request at half of 10 a second
        # The retry emptied the bucket again, which refills at 5 a second: another process waits if it asks
        # within 0.2 s of that, so the fake server must not answer late (FakeOpenAI loads its tokenizer first).
        assert other_process._failover.limiters["m0"].take() > 0
        redis.Redis.from_url(redis_url).delete(bucket_key(settings.models["m0"]))


def test_rerank_and_chat_calls_take_from_their_budgets(redis_url: str, client: Any) -> None:
    tag = uuid.uuid4().hex[:12]
    settings = Settings.model_validate(
        {
            "models": {
                "r": {"task": "rerank", "provider": "fake", "model": f"rerank-{tag}", "requests_per_minute": 60},
                "c": {"task": "chat", "provider": "fake", "model": f"chat-{tag}", "tokens_per_minute": 600},
            },
            "retrieval": {"rerank": ["r"], "answer": ["c"]},
            "embeddings": {"cache_ttl_days": 0},
            "vectors": {"store": "memory", "dimensions": 16},
            "cache": {"url": redis_url},
        }
    )
    embeddings = Embeddings.from_settings(settings)
    store = memory_store(dimensions=16, embedder=embeddings)
    text = "Refunds are paid within 14 days of the request, to the original card."
    store.get_collection("notes", create=True).upsert_many(
        [VectorRecord("n1:0", embeddings.embed(text), text, {"record_id": "n1"})]
    )
    retrieval = Retrieval.from_settings(settings, store=store)
    started = time.monotonic()
    assert retrieval.answer("notes", "how are refunds paid?").answered  # one rerank call, one chat call
    retrieval.rerank("refunds", retrieval.store.get_collection("notes", create=True).search("refunds"))
    elapsed = time.monotonic() - started
    keys = [bucket_key(settings.models[name]) for name in ("r", "c")]
    requests_left = float(client.hget(keys[0], "r"))
    assert 8 <= requests_left <= 8 + elapsed + 0.01  # 10 at most at once, 1 a second: two calls taken
    assert float(client.hget(keys[1], "t")) < 0  # a prompt over the 100-token bucket went, leaving a debt
    client.delete(*keys)


def test_a_limiter_whose_redis_comes_back_limits_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ratelimit, "_warned_in", None)
    port = free_port()
    bucket = RateLimiter.from_url(
        f"redis://127.0.0.1:{port}/0",
        name="m",
        key=f"t:{uuid.uuid4().hex}",
        budget=Budget(requests_per_minute=600, tokens_per_minute=None, burst_seconds=1),
        retry_seconds=0.2,
    )
    assert takes_until_refused_or(bucket, 30) == 30  # no Redis: no limit
    with redis_server(port):
        time.sleep(0.25)
        assert 10 <= takes_until_refused(bucket) <= 12
