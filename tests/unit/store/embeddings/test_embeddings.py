"""The ``Embeddings`` facade: batching by count and tokens, order, duplicates, the defaults."""

from __future__ import annotations

import math
from typing import Any

import pytest

from store.calls.tokens import estimate_tokens
from store.embeddings import Embedding, Embeddings
from store.embeddings.batching import plan_batches
from store.embeddings.providers.base import Limits
from store.embeddings.providers.fake import hash_embed
from store.errors import ConfigError, InputError
from store.settings import Settings
from store.vectors.backends import memory_store
from store.vectors.base import QueryEmbedder
from store.vectors.records import VectorRecord
from tests.fake_bodies import served_embed
from tests.fake_openai import FakeOpenAI, settings_for


def embeddings_for(server: FakeOpenAI, **options: Any) -> Embeddings:
    return Embeddings.from_settings(settings_for(server, **options))


def test_the_first_try_default_is_the_fake_model_without_a_cache() -> None:
    settings = Settings.model_validate({"vectors": {"dimensions": 16}, "embeddings": {"cache_ttl_days": 0}})
    embeddings = Embeddings.from_settings(settings)
    assert (embeddings.space, embeddings.dimensions, embeddings.cache) == ("fake", 16, None)
    assert embeddings.embed("renewal call") == hash_embed("renewal call", 16)


def test_a_batch_of_n_texts_takes_ceil_n_over_batch_size_calls(fake_openai: FakeOpenAI) -> None:
    texts = [f"note number {i}" for i in range(25)]
    embeddings = embeddings_for(fake_openai, batch_size=10)
    vectors = embeddings.embed_many(texts)
    assert fake_openai.calls == math.ceil(25 / 10)
    assert sorted(len(r.inputs) for r in fake_openai.requests) == [5, 10, 10]
    assert vectors == [served_embed(text, 8) for text in texts]


def test_the_provider_input_limit_caps_the_batch(fake_openai: FakeOpenAI) -> None:
    embeddings = embeddings_for(fake_openai, batch_size=10, model={"max_inputs": 4})
    embeddings.embed_many([f"note {i}" for i in range(10)])
    assert fake_openai.calls == 3


def test_a_batch_over_the_token_budget_is_split(fake_openai: FakeOpenAI) -> None:
    texts = [f"{i:03d}" + "x" * 37 for i in range(30)]  # 40 characters: 10 tokens each
    embeddings = embeddings_for(fake_openai, batch_size=96, model={"max_tokens_per_request": 100})
    embeddings.embed_many(texts)
    assert fake_openai.calls == math.ceil(30 * 10 / 100)
    assert all(sum(estimate_tokens(t) for t in r.inputs) <= 100 for r in fake_openai.requests)


def test_a_text_over_the_input_limit_is_an_input_error(fake_openai: FakeOpenAI) -> None:
    embeddings = embeddings_for(fake_openai, model={"max_tokens_per_input": 100})
    with pytest.raises(InputError) as raised:
        embeddings.embed_many(["short", "y" * 401])
    assert str(raised.value) == (
        "a text of 401 characters (~101 tokens) is over model 'text-embedding-test''s limit of 100 tokens "
        "per input (max_tokens_per_input): chunk it smaller"
    )
    assert fake_openai.calls == 0


def test_plan_batches_keeps_a_lone_big_text_alone() -> None:
    limits = Limits(max_inputs=10, max_tokens_per_request=10, max_tokens_per_input=50)
    batches = plan_batches(["a" * 4, "b" * 200, "c" * 4, "d" * 4], batch_size=10, limits=limits, model="m")
    assert batches == [range(0, 1), range(1, 2), range(2, 4)]


def test_parallel_batches_come_back_in_input_order(fake_openai: FakeOpenAI) -> None:
    texts = [f"record {i} talks about topic {i % 7}" for i in range(200)]
    embeddings = embeddings_for(fake_openai, batch_size=7, parallelism=4)
    assert embeddings.embed_many(texts) == [served_embed(text, 8) for text in texts]
    assert fake_openai.calls == math.ceil(200 / 7)


def test_parallelism_bounds_the_calls_in_flight(fake_openai: FakeOpenAI) -> None:
    fake_openai.always(delay=0.05)
    embeddings = embeddings_for(fake_openai, batch_size=1, parallelism=3)
    embeddings.embed_many([f"text {i}" for i in range(12)])
    assert fake_openai.calls == 12
    assert fake_openai.max_in_flight == 3


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


def test_model_is_space_by_its_older_name() -> None:
    """``Embeddings.model`` held the vector space, not always a model name: it warns, one release."""
    embeddings = Embeddings.from_settings(Settings.model_validate({"embeddings": {"cache_ttl_days": 0}}))
    with pytest.warns(DeprecationWarning, match="Embeddings.space"):
        assert embeddings.model == embeddings.space == "fake"
    with pytest.warns(DeprecationWarning, match="FailoverChain.space"):
        assert embeddings.chain.model == "fake"
