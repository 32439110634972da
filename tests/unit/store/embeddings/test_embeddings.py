"""The ``Embeddings`` facade: duplicates embedded once, strings only, each vector's model, the defaults (its batches:
test_batching.py)."""

from __future__ import annotations

from typing import Any

import fakeredis
import pytest

from store.calls import caps, spend
from store.embeddings import Embedding, Embeddings
from store.embeddings.cache import EmbeddingCache
from store.embeddings.providers.fake import hash_embed
from store.errors import BudgetExceeded, ConfigError, EmbeddingError
from store.settings import Settings
from store.vectors.backends import memory_store
from store.vectors.base import QueryEmbedder
from store.vectors.records import VectorRecord
from tests.fake_openai import FakeOpenAI, settings_for


def embeddings_for(server: FakeOpenAI, **options: Any) -> Embeddings:
    return Embeddings.from_settings(settings_for(server, **options))


def test_the_first_try_default_is_the_fake_model_without_a_cache() -> None:
    settings = Settings.model_validate({"vectors": {"dimensions": 16}, "embeddings": {"cache_ttl_days": 0}})
    embeddings = Embeddings.from_settings(settings)
    assert (embeddings.space, embeddings.dimensions, embeddings.cache) == ("fake", 16, None)
    assert embeddings.embed("renewal call") == hash_embed("renewal call", 16)


def test_duplicate_texts_are_embedded_once(fake_openai: FakeOpenAI) -> None:
    embeddings = embeddings_for(fake_openai)
    vectors = embeddings.embed_many(["same", "other", "same", "same"])
    assert fake_openai.requests[0].inputs == ["same", "other"]
    assert vectors[0] == vectors[2] == vectors[3] == hash_embed("same", 8)


def test_nothing_to_embed_makes_no_call(fake_openai: FakeOpenAI) -> None:
    assert embeddings_for(fake_openai).embed_many([]) == []
    assert fake_openai.calls == 0


def test_texts_must_be_strings(fake_openai: FakeOpenAI) -> None:
    embeddings = embeddings_for(fake_openai)
    with pytest.raises(ConfigError, match="not a single string"):
        embeddings.embed_many("one text")
    with pytest.raises(ConfigError, match="must be strings, got int"):
        embeddings.embed_many(["a", 3])  # type: ignore[list-item]


def test_each_vector_says_which_model_made_it(fake_openai: FakeOpenAI) -> None:
    with FakeOpenAI() as backup:
        fake_openai.always(status=401)
        settings = settings_for(fake_openai, backup, models=["model-a", "model-b"], allow_mixed_models=True)
        embeddings = Embeddings.from_settings(settings)
        # Each vector is recorded under its model's space: the name, and the base_url that served it.
        assert embeddings.embed_many_with_models(["alpha"]) == [
            Embedding(hash_embed("alpha", 8), f"model-b@{backup.url}")
        ]
        assert embeddings.space == f"model-a@{fake_openai.url}"
        assert embeddings.stats.failovers == {"m0": 1}


def test_embeddings_answer_text_queries_of_a_collection() -> None:
    settings = Settings.model_validate({"vectors": {"dimensions": 64}, "embeddings": {"cache_ttl_days": 0}})
    embeddings = Embeddings.from_settings(settings)
    embedder: QueryEmbedder = embeddings
    store = memory_store(dimensions=64, embedder=embedder)
    notes = store.get_collection("notes", create=True)
    texts = {"a": "pricing for the annual plan", "b": "onboarding schedule slipped", "c": "invoice paid"}
    vectors = embeddings.embed_many(list(texts.values()))
    notes.upsert_many(
        [VectorRecord(id, vector, text) for (id, text), vector in zip(texts.items(), vectors, strict=True)]
    )
    assert notes.search("when does onboarding start", limit=1)[0].id == "b"


def test_the_vector_space_has_one_name_and_no_deprecated_alias() -> None:
    """``model`` held the vector space, not always a model name: it is gone, ``space`` says what it is."""
    embeddings = Embeddings.from_settings(Settings.model_validate({"embeddings": {"cache_ttl_days": 0}}))
    assert embeddings.space == embeddings.chain.space == "fake"
    assert not hasattr(embeddings, "model") and not hasattr(embeddings.chain, "model")


def test_each_call_s_vectors_are_cached_as_it_answers_so_a_later_failure_buys_nothing_twice(
    fake_openai: FakeOpenAI,
) -> None:
    """Three calls of two texts, the third refused: the first two calls' vectors are in the cache, so embedding
    the same texts again (a retry, a paused run resumed) sends only the third call's texts."""
    chain = embeddings_for(fake_openai).chain
    cache = EmbeddingCache(fakeredis.FakeRedis(), ttl_seconds=60)
    embeddings = Embeddings(chain, cache=cache, batch_size=2, parallelism=1)
    texts = ["a", "b", "c", "d", "e", "f"]
    fake_openai.push()
    fake_openai.push()
    fake_openai.push(status=400, message="input is too long for this model")
    with pytest.raises(EmbeddingError):
        embeddings.embed_many(texts)
    assert [r.inputs for r in fake_openai.requests] == [["a", "b"], ["c", "d"], ["e", "f"]]
    assert embeddings.embed_many(texts) == [hash_embed(t, 8) for t in texts]
    assert [r.inputs for r in fake_openai.requests[3:]] == [["e", "f"]]


def test_under_a_run_s_cap_a_batch_s_calls_are_reserved_together_so_meeting_the_cap_buys_nothing(
    fake_openai: FakeOpenAI,
) -> None:
    """Issue 50: with the cache off, a batch of three calls whose third would pass its run's cap bought the first
    two, was parked, and its resumed run bought them again. Reserved together before the first call, the three
    are refused together: nothing is sent, nothing is lost; under a cap that holds them, all three go."""
    embeddings = Embeddings(embeddings_for(fake_openai).chain, cache=None, batch_size=2, parallelism=2)
    texts = [f"renewal call number {i}" for i in range(6)]
    needed = embeddings.chain.meter.counter.total(texts)
    refused = pytest.raises(BudgetExceeded, match=f"the batch's calls need {needed}")
    with spend.tallied("r1"), caps.capped(caps.Budget(spent=spend.Spent(), max_tokens=needed - 1)), refused:
        embeddings.embed_many(texts)
    assert fake_openai.requests == []
    with spend.tallied("r1"), caps.capped(caps.Budget(spent=spend.Spent(), max_tokens=needed)):
        assert embeddings.embed_many(texts) == [hash_embed(t, 8) for t in texts]
    assert sorted(text for r in fake_openai.requests for text in r.inputs) == sorted(texts)
