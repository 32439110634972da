"""The provider seam: a call's limits (from the model's settings, the tightest of two), the vectors a call may
count its tokens with, and the module ``build_provider`` picks for each provider."""

from __future__ import annotations

from store.embeddings.providers import build_provider
from store.embeddings.providers.base import DEFAULT_LIMITS, Limits, Vectors
from store.embeddings.providers.fake import FakeProvider
from store.embeddings.providers.local import LocalProvider
from store.embeddings.providers.ollama import OllamaProvider
from store.embeddings.providers.openai import OpenAIProvider
from store.settings import ModelSettings
from tests.fake_openai import FakeOpenAI
from tests.unit.store.embeddings.providers.test_ollama import ollama_model
from tests.unit.store.embeddings.providers.test_openai import openai_model


def test_build_provider_picks_the_module_for_each_provider(fake_openai: FakeOpenAI) -> None:
    assert isinstance(build_provider("f", ModelSettings(provider="fake", model="fake", dimensions=8)), FakeProvider)
    assert isinstance(build_provider("o", openai_model(fake_openai)), OpenAIProvider)
    assert isinstance(build_provider("l", ollama_model(fake_openai)), OllamaProvider)
    local = ModelSettings(provider="local", model="all-MiniLM-L6-v2", dimensions=384)
    assert isinstance(build_provider("x", local), LocalProvider)


def test_limits_come_from_the_model_and_two_meet_at_the_tightest() -> None:
    small = ModelSettings(provider="fake", model="m", dimensions=4, max_inputs=16, max_tokens_per_input=512)
    limits = Limits.from_settings(small)
    assert (limits.max_inputs, limits.max_tokens_per_input) == (16, 512)
    assert limits.max_tokens_per_request == DEFAULT_LIMITS.max_tokens_per_request
    other = Limits(max_inputs=64, max_tokens_per_request=1000, max_tokens_per_input=8192)
    assert limits.tightest(other) == Limits(max_inputs=16, max_tokens_per_request=1000, max_tokens_per_input=512)


def test_vectors_are_a_list_that_may_carry_the_call_s_tokens() -> None:
    counted = Vectors([[1.0, 0.0]], tokens=7)
    assert counted == [[1.0, 0.0]] and counted.tokens == 7
    assert Vectors().tokens is None
