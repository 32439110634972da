"""The embedding cache without a Redis: the value format, a TTL of zero, and a Redis that errors."""

from __future__ import annotations

import pytest
import redis

from store.embeddings import Embeddings
from store.embeddings.cache import EmbeddingCache, from_bytes, to_bytes
from tests.fake_openai import FakeOpenAI, settings_for
from tests.services import free_port


def test_vectors_round_trip_as_float32() -> None:
    vector = [0.1, -0.5, 0.25]
    assert len(to_bytes(vector)) == 12
    assert from_bytes(to_bytes(vector)) == pytest.approx(vector, rel=1e-6)


def test_ttl_zero_turns_the_cache_off(fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    embeddings = Embeddings.from_settings(settings_for(fake_openai, cache_url=dead, cache_ttl_days=0))
    assert embeddings.cache is None
    embeddings.embed("alpha")
    embeddings.embed("alpha")
    assert fake_openai.calls == 2
    assert not caplog.records


def test_a_redis_error_pauses_the_cache() -> None:
    class Broken:
        calls = 0

        def mget(self, keys: list[str]) -> None:
            Broken.calls += 1
            raise redis.ConnectionError("refused")

    cache = EmbeddingCache(Broken(), ttl_seconds=60, pause_seconds=30)
    assert cache.get_many("m", 2, ["a"]) == [None]
    assert cache.get_many("m", 2, ["a"]) == [None]
    assert Broken.calls == 1
