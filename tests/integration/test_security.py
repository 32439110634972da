"""Doors closed (issue 9), against real servers: no table made by a typo, no markup read from stored text,
no poisoned vector served from the cache."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from store import VectorRecord
from store.embeddings import Embeddings
from store.embeddings.cache import EmbeddingCache, cache_key
from store.embeddings.providers.fake import hash_embed
from store.errors import PermanentError
from store.settings import load_settings
from tests.backends import unique_name
from tests.fake_openai import FakeOpenAI, settings_for
from tests.settings_files import pushed_collection
from tests.workers import run_cli


def test_a_nan_answer_fails_over_and_never_reaches_the_cache(scratch_redis_url: str) -> None:
    url = scratch_redis_url
    redis.Redis.from_url(url).flushdb()
    with FakeOpenAI(dimensions=8) as broken, FakeOpenAI(dimensions=8) as healthy:
        broken.always(nan=True)
        settings = settings_for(broken, healthy, cache_url=url, cache_ttl_days=1)
        embeddings = Embeddings.from_settings(settings)
        assert embeddings.embed_many(["alpha"]) == [hash_embed("alpha", 8)]
        assert (broken.calls, healthy.calls) == (1, 1)
        cache = EmbeddingCache.from_url(url, ttl_seconds=60)
        assert cache.get_many(embeddings.space, 8, ["alpha"]) == [pytest.approx(hash_embed("alpha", 8), abs=1e-6)]
        only_broken = Embeddings.from_settings(settings_for(broken, cache_url=url, cache_ttl_days=1))
        with pytest.raises(PermanentError, match="returned a vector with NaN or infinite values"):
            only_broken.embed_many(["beta"])
        assert cache.get_many(embeddings.space, 8, ["beta"]) == [None]
        poisoned = float("nan")
        redis.Redis.from_url(url).set(
            cache_key(embeddings.space, 8, "gamma"),
            b"".join(__import__("struct").pack("<f", poisoned) for _ in range(8)),
        )
        assert cache.get_many(embeddings.space, 8, ["gamma"]) == [None]  # an old poisoned entry is a miss
        cache.close()
        embeddings.close()
        only_broken.close()


def test_reading_never_creates_a_collection_and_stored_text_is_printed_literally(
    tmp_path: Path, postgres_url: str
) -> None:
    from store.vectors.pgvector import PgvectorStore

    name = unique_name("literal")
    config = pushed_collection(tmp_path, postgres_url, name, dimensions=16)
    settings = load_settings(config)
    embedder = Embeddings.from_settings(settings)
    text = "[bold red]not markup[/] [/b] [link=http://evil.test]click[/link]"
    with PgvectorStore(postgres_url, dimensions=16) as store:
        store.get_collection(name, create=True).upsert(
            VectorRecord("a:0", embedder.embed(text), text, {"record_id": "a"})
        )
        before = set(store.list_collections())

    found = run_cli(config, "search", name, "markup click")
    assert found.returncode == 0, found.stderr
    assert "[bold red]not markup[/] [/b]" in found.stdout and "\x1b]8;" not in found.stdout

    typo = run_cli(config, "search", name + "x", "anything")
    assert typo.returncode == 2 and f"collection '{name}x' does not exist" in typo.stderr
    with PgvectorStore(postgres_url, dimensions=16) as store:
        assert set(store.list_collections()) == before
