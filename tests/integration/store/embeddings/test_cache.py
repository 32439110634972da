"""The Redis cache in front of the chain: real Redis, key and value format, and a dead Redis."""

from __future__ import annotations

import hashlib
import logging
import uuid
from typing import Any

import numpy as np
import pytest
import redis

from store.embeddings import Embeddings
from store.embeddings.cache import cache_key, to_bytes
from store.embeddings.providers.fake import hash_embed
from tests.fake_bodies import dense_embed
from tests.fake_openai import FakeOpenAI, settings_for
from tests.services import redis_server


@pytest.fixture
def model_name() -> str:
    """A model name of this test alone, so its cache keys never meet another test's."""
    return f"test-model-{uuid.uuid4().hex}"


def cached_embeddings(server: FakeOpenAI, url: str, model: str, **options: Any) -> Embeddings:
    settings = settings_for(server, models=[model], cache_url=url, cache_ttl_days=1, **options)
    return Embeddings.from_settings(settings)


class CountingClient:
    """A real redis client that counts the round trips made through it."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.mgets = 0
        self.pipelines = 0

    def mget(self, keys: list[str]) -> Any:
        self.mgets += 1
        return self.client.mget(keys)

    def pipeline(self, **options: Any) -> Any:
        self.pipelines += 1
        return self.client.pipeline(**options)

    def close(self) -> None:
        self.client.close()


def test_a_second_embed_many_makes_no_call(fake_openai: FakeOpenAI, redis_url: str, model_name: str) -> None:
    embeddings = cached_embeddings(fake_openai, redis_url, model_name, batch_size=4)
    texts = [f"note {i}" for i in range(10)]
    first = embeddings.embed_many(texts)
    assert fake_openai.calls == 3
    again = embeddings.embed_many(texts)
    assert all(vector == pytest.approx(old, rel=1e-6) for vector, old in zip(again, first, strict=True))
    assert fake_openai.calls == 3
    assert (embeddings.stats.cache_hits, embeddings.stats.cache_misses) == (10, 10)


def test_only_misses_go_to_the_provider(fake_openai: FakeOpenAI, redis_url: str, model_name: str) -> None:
    embeddings = cached_embeddings(fake_openai, redis_url, model_name)
    embeddings.embed_many(["alpha", "beta"])
    embeddings.embed_many(["beta", "gamma", "alpha", "delta"])
    assert [request.inputs for request in fake_openai.requests] == [["alpha", "beta"], ["gamma", "delta"]]


def test_one_mget_per_call_and_one_pipeline_per_provider_call(
    fake_openai: FakeOpenAI, redis_url: str, model_name: str
) -> None:
    """The texts are looked up in one MGET; each provider call's vectors are written in one pipeline as it
    answers, so what a call bought is kept even when a later call of the same batch fails."""
    embeddings = cached_embeddings(fake_openai, redis_url, model_name, batch_size=2)
    assert embeddings.cache is not None
    counting = CountingClient(embeddings.cache.client)
    embeddings.cache.client = counting
    embeddings.embed_many([f"text {i}" for i in range(9)])
    assert (counting.mgets, counting.pipelines, fake_openai.calls) == (1, 5, 5)


def test_keys_values_and_ttl(fake_openai: FakeOpenAI, redis_url: str, model_name: str) -> None:
    cached_embeddings(fake_openai, redis_url, model_name).embed("renewal call")
    space = f"{model_name}@{fake_openai.url}"  # a model at a base_url: keyed by both (vector_space)
    text = hashlib.sha256(b"renewal call").hexdigest()
    digest = hashlib.sha256(f"\x00{space}\x008\x00{text}".encode()).hexdigest()  # unscoped: the shared pool
    key = "vectorsync:emb:" + digest
    assert cache_key(space, 8, "renewal call") == key
    client = redis.Redis.from_url(redis_url)
    value = client.get(key)
    assert value == np.asarray(hash_embed("renewal call", 8), dtype="<f4").tobytes()
    assert 86_000 < client.ttl(key) <= 86_400
    client.close()


def test_a_value_of_another_size_is_a_miss(fake_openai: FakeOpenAI, redis_url: str, model_name: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.set(cache_key(f"{model_name}@{fake_openai.url}", 8, "alpha"), to_bytes([1.0, 0.0]), ex=60)
    client.close()
    embeddings = cached_embeddings(fake_openai, redis_url, model_name)
    assert embeddings.embed("alpha") == hash_embed("alpha", 8)
    assert fake_openai.calls == 1


def test_failover_vectors_are_cached_under_their_own_model(redis_url: str, model_name: str) -> None:
    with FakeOpenAI() as primary, FakeOpenAI() as backup:
        primary.push(status=401)
        other = model_name + "-b"
        settings = settings_for(
            primary,
            backup,
            models=[model_name, other],
            cache_url=redis_url,
            cache_ttl_days=1,
            allow_mixed_models=True,
        )
        Embeddings.from_settings(settings).embed("alpha")
    client = redis.Redis.from_url(redis_url)
    assert client.exists(cache_key(f"{other}@{backup.url}", 8, "alpha")) == 1
    assert client.exists(cache_key(f"{model_name}@{primary.url}", 8, "alpha")) == 0
    client.close()


def test_two_endpoints_serving_other_weights_under_one_model_name_share_no_cached_vector(
    redis_url: str, model_name: str
) -> None:
    """Audit defect: the cache was keyed by model name and size only, so a second server's "same" model
    answered with the first server's vectors, and was never called."""
    with FakeOpenAI() as first, FakeOpenAI(dense=True) as second:
        assert cached_embeddings(first, redis_url, model_name).embed("alpha") == hash_embed("alpha", 8)
        assert cached_embeddings(second, redis_url, model_name).embed("alpha") == dense_embed("alpha", 8)
        assert (first.calls, second.calls) == (1, 1)


def test_endpoints_given_the_same_weights_share_cached_vectors(redis_url: str, model_name: str) -> None:
    """``weights`` says two endpoints serve the same model: the second is never asked for what is cached."""
    with FakeOpenAI() as first, FakeOpenAI() as second:
        shared = {"weights": model_name}
        made = Embeddings.from_settings(
            settings_for(first, models=[model_name], model=shared, cache_url=redis_url, cache_ttl_days=1)
        ).embed("alpha")
        again = Embeddings.from_settings(
            settings_for(second, models=[model_name], model=shared, cache_url=redis_url, cache_ttl_days=1)
        ).embed("alpha")
        assert again == made and again.model == model_name
        assert (first.calls, second.calls) == (1, 0)


def test_a_dead_redis_degrades_to_no_cache(
    fake_openai: FakeOpenAI, model_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    with redis_server() as (url, process):
        embeddings = cached_embeddings(fake_openai, url, model_name)
        embeddings.embed_many(["alpha", "beta"])
        embeddings.embed_many(["alpha", "beta"])
        assert fake_openai.calls == 1
        process.kill()
        process.wait()
        with caplog.at_level(logging.WARNING, logger="store.embeddings.cache"):
            assert embeddings.embed_many(["alpha", "beta"]) == [hash_embed("alpha", 8), hash_embed("beta", 8)]
            assert embeddings.embed_many(["gamma"]) == [hash_embed("gamma", 8)]
    assert fake_openai.calls == 3
    warnings = [record.getMessage() for record in caplog.records if record.name == "store.embeddings.cache"]
    assert len(warnings) == 1  # rate-limited
    assert warnings[0].startswith("embedding cache unavailable (ConnectionError")
