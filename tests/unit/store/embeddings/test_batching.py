"""Batches of texts for a provider: by count and estimated tokens, a lone big text alone, calls in parallel within
their bound, vectors back in input order (through Embeddings, which plans and sends them)."""

from __future__ import annotations

import math

import pytest

from store.calls.tokens import estimate_tokens
from store.embeddings.batching import plan_batches
from store.embeddings.providers.base import Limits
from store.errors import InputError
from tests.fake_bodies import served_embed
from tests.fake_openai import FakeOpenAI
from tests.unit.store.embeddings.test_embeddings import embeddings_for


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
