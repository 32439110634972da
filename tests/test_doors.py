"""Doors closed (issue 9): no key to a stranger's endpoint, no secret in a message, no table made by a typo,
no markup read from stored text, no Flower without a login, no poisoned vector served from the cache."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from store import ConfigError, VectorRecord
from store.embeddings import Embeddings
from store.embeddings.cache import EmbeddingCache, cache_key
from store.embeddings.providers.fake import hash_embed
from store.embeddings.providers.openai import OpenAIProvider
from store.errors import PermanentError
from store.settings import ModelSettings, Settings, load_settings
from store.settings.urls import without_credentials
from store.state.sql import safe_url
from tests.backends import unique_name
from tests.fake_openai import FakeOpenAI, settings_for
from tests.services import redis_db
from tests.workers import pushed_collection, run_cli
from worker.flower import login_problem


def test_the_openai_key_goes_to_openai_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-real-openai-key-0123456789")
    with FakeOpenAI(dimensions=4) as server:
        model = ModelSettings(provider="openai", model="m", dimensions=4, base_url=server.url)
        OpenAIProvider(name="m", settings=model).embed_batch(["hello"])
        assert server.requests[0].authorization == "Bearer unused"
        monkeypatch.setenv("LOCAL_KEY", "sk-local")
        named = model.model_copy(update={"api_key_env": "LOCAL_KEY"})
        OpenAIProvider(name="m", settings=named).embed_batch(["hello"])
        assert server.requests[1].authorization == "Bearer sk-local"


def test_secrets_stay_out_of_messages_and_reprs(tmp_path: Path) -> None:
    config = tmp_path / "vectorsync.toml"
    config.write_text('[models.m]\nprovider = "openai"\nmodel = "x"\ndimensions = 4\n'
                      'api_key_env = "sk-proj-pasted-key-0123456789"\n')
    with pytest.raises(ConfigError) as pasted:
        load_settings(config)
    assert "pasted-key" not in str(pasted.value)
    assert "must name the environment variable that holds the key" in str(pasted.value)
    settings = Settings.model_validate({"vectors": {"url": "postgresql://app:hunter2@db/x?password=pw2"},
                                        "broker": {"url": "redis://:r3dis@cache:6379/0"}})
    shown = repr(settings)
    assert "hunter2" not in shown and "pw2" not in shown and "r3dis" not in shown
    assert "pw2" not in safe_url("postgresql://app@db/x?sslmode=require&password=pw2")
    assert without_credentials("http://qdrant:6333/?api_key=abc&x=1") == "http://qdrant:6333/?api_key=***&x=1"


def test_flower_refuses_to_start_without_a_real_login() -> None:
    assert "Flower has no login" in (login_problem({}) or "")
    assert "example's password 'change-me'" in (login_problem({"FLOWER_BASIC_AUTH": "admin:change-me"}) or "")
    assert "each with a password" in (login_problem({"FLOWER_BASIC_AUTH": "admin"}) or "")
    assert login_problem({"FLOWER_BASIC_AUTH": "ops:9f2c7e1a"}) is None
    assert login_problem({"FLOWER_AUTH": ".*@example.com"}) is None


def test_a_nan_answer_fails_over_and_never_reaches_the_cache(redis_url: str) -> None:
    url = redis_db(redis_url, 11)
    redis.Redis.from_url(url).flushdb()
    with FakeOpenAI(dimensions=8) as broken, FakeOpenAI(dimensions=8) as healthy:
        broken.always(nan=True)
        settings = settings_for(broken, healthy, cache_url=url, cache_ttl_days=1)
        embeddings = Embeddings.from_settings(settings)
        assert embeddings.embed_many(["alpha"]) == [hash_embed("alpha", 8)]
        assert (broken.calls, healthy.calls) == (1, 1)
        cache = EmbeddingCache.from_url(url, ttl_seconds=60)
        assert cache.get_many(embeddings.model, 8, ["alpha"]) == [pytest.approx(hash_embed("alpha", 8), abs=1e-6)]
        only_broken = Embeddings.from_settings(settings_for(broken, cache_url=url, cache_ttl_days=1))
        with pytest.raises(PermanentError, match="returned a vector with NaN or infinite values"):
            only_broken.embed_many(["beta"])
        assert cache.get_many(embeddings.model, 8, ["beta"]) == [None]
        poisoned = float("nan")
        redis.Redis.from_url(url).set(cache_key(embeddings.model, 8, "gamma"),
                                      b"".join(__import__("struct").pack("<f", poisoned) for _ in range(8)))
        assert cache.get_many(embeddings.model, 8, ["gamma"]) == [None]  # an old poisoned entry is a miss
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
        store.collection(name).upsert(VectorRecord("a:0", embedder.embed(text), text, {"record_id": "a"}))
        before = set(store.list_collections())

    found = run_cli(config, "search", name, "markup click")
    assert found.returncode == 0, found.stderr
    assert "[bold red]not markup[/] [/b]" in found.stdout and "\x1b]8;" not in found.stdout

    typo = run_cli(config, "search", name + "x", "anything")
    assert typo.returncode == 2 and f"collection '{name}x' does not exist" in typo.stderr
    with PgvectorStore(postgres_url, dimensions=16) as store:
        assert set(store.list_collections()) == before
