"""The openai provider, through the real openai client against the fake server: vectors in order, its errors
translated without the key, Azure's client; and how vectors travel, base64 float32 with a remembered float
fallback."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import numpy as np
import pytest

from store.embeddings import Embeddings
from store.embeddings.providers.openai import OpenAIProvider, decode_vector, make_client
from store.errors import ConfigError, InputError, PermanentError, TransientError
from store.settings import ModelSettings
from tests.fake_bodies import dense_embed, served_embed
from tests.fake_openai import FakeOpenAI, settings_for

#: Several words each, so the vectors are not one-hot and float32 rounding shows.
TEXTS = [f"customer {i} asked about pricing, onboarding and the {i % 5} renewal terms" for i in range(40)]
DIMENSIONS = 64


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(dimensions=DIMENSIONS) as fake:
        yield fake


@pytest.fixture
def strict() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(dimensions=DIMENSIONS, refuse_base64=True) as fake:
        yield fake


def provider_for(server: FakeOpenAI, **fields: object) -> OpenAIProvider:
    values: dict[str, object] = {
        "provider": "openai",
        "model": "text-embedding-test",
        "dimensions": DIMENSIONS,
        "base_url": server.url,
        "timeout": 2.0,
    }
    return OpenAIProvider(name="m", settings=ModelSettings.model_validate({**values, **fields}))


def formats(server: FakeOpenAI) -> list[str | None]:
    return [request.encoding_format for request in server.requests]


def float32(vectors: list[list[float]]) -> np.ndarray:
    return np.asarray(vectors, dtype=np.float32)


def served(texts: list[str]) -> np.ndarray:
    """What the fake server's hashed vectors are once read back as float32."""
    return float32([served_embed(text, DIMENSIONS) for text in texts])


def float_provider(server: FakeOpenAI) -> OpenAIProvider:
    provider = provider_for(server)
    provider.encoding_format = "float"
    return provider


@pytest.mark.parametrize("dense", [False, True])
def test_base64_and_float_give_the_same_float32_vectors(dense: bool) -> None:
    with FakeOpenAI(dimensions=DIMENSIONS, dense=dense) as server:
        as_base64 = provider_for(server).embed_batch(TEXTS)
        as_float = float_provider(server).embed_batch(TEXTS)
        assert formats(server) == ["base64", "float"]
    assert np.array_equal(float32(as_base64), float32(as_float))
    assert as_base64 == float32(as_base64).tolist()  # decoded float32 values, nothing lost or added
    embed = dense_embed if dense else served_embed
    assert np.array_equal(float32(as_base64), float32([embed(text, DIMENSIONS) for text in TEXTS]))
    assert len({tuple(vector) for vector in as_base64}) > len(TEXTS) // 2  # not one vector for all


def test_the_client_asks_for_base64_and_gets_fewer_bytes() -> None:
    with FakeOpenAI(dimensions=DIMENSIONS, dense=True) as server:
        provider_for(server).embed_batch(TEXTS)
        assert server.requests[-1].encoding_format == "base64"
        assert server.requests[-1].body["encoding_format"] == "base64"
        base64_bytes = server.sent_bytes
        float_provider(server).embed_batch(TEXTS)
        assert server.requests[-1].encoding_format == "float"
        float_bytes = server.sent_bytes - base64_bytes
    assert base64_bytes * 2 < float_bytes


def test_a_server_refusing_base64_gets_float_at_once_and_from_then_on(
    strict: FakeOpenAI, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-secret-0123456789")
    provider = provider_for(strict, api_key_env="TEST_EMBED_KEY")
    with caplog.at_level(logging.INFO, logger="store.embeddings.providers.openai"):
        first = provider.embed_batch(TEXTS[:20])
        second = provider.embed_batch(TEXTS[20:])
    assert formats(strict) == ["base64", "float", "float"]
    assert provider.encoding_format == "float"
    assert np.array_equal(float32(first + second), served(TEXTS))
    [record] = [r for r in caplog.records if "float" in r.getMessage()]
    assert record.levelno == logging.INFO
    assert f"model 'text-embedding-test' at {strict.url} takes float embeddings only" in record.getMessage()
    assert "0123456789" not in caplog.text


def test_a_refused_base64_is_not_a_failed_attempt_of_the_chain(strict: FakeOpenAI) -> None:
    embeddings = Embeddings.from_settings(settings_for(strict, dimensions=DIMENSIONS, max_attempts=1))
    assert np.array_equal(float32(embeddings.embed_many(TEXTS[:3])), served(TEXTS[:3]))
    assert formats(strict) == ["base64", "float"]


def test_a_422_naming_the_encoding_format_falls_back_too(server: FakeOpenAI) -> None:
    server.push(status=422, message="body.encoding_format: Input should be 'float'")
    provider = provider_for(server)
    assert np.array_equal(float32(provider.embed_batch(TEXTS[:2])), served(TEXTS[:2]))
    assert formats(server) == ["base64", "float"]
    assert provider.encoding_format == "float"


def test_a_400_about_the_input_is_not_retried_as_float(server: FakeOpenAI) -> None:
    server.reject_containing = "forbidden"
    provider = provider_for(server)
    with pytest.raises(InputError, match="answered 400: input contains 'forbidden'"):
        provider.embed_batch(["a forbidden text"])
    assert formats(server) == ["base64"]
    assert provider.encoding_format == "base64"


def test_a_server_answering_floats_to_base64_is_taken_at_its_word(
    server: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    server.push(floats=True)
    provider = provider_for(server)
    with caplog.at_level(logging.INFO, logger="store.embeddings.providers.openai"):
        first = provider.embed_batch(TEXTS[:2])
        provider.embed_batch(TEXTS[2:4])
    assert np.array_equal(float32(first), served(TEXTS[:2]))
    assert formats(server) == ["base64", "float"]
    assert "answered floats when asked for base64" in caplog.text


def test_decode_vector_reads_little_endian_float32_and_refuses_garbage() -> None:
    assert decode_vector("AACAPwAAAMA=") == [1.0, -2.0]
    assert decode_vector([0.5, 0.25]) == [0.5, 0.25]
    with pytest.raises(ValueError):
        decode_vector("AACAPwA=")  # 5 bytes: not whole float32 values
    with pytest.raises(ValueError):
        decode_vector("not base64!")


def test_a_broken_base64_vector_is_a_permanent_error(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tests.fake_bodies.base64_vector", lambda vector: "AACAPwA=")
    with pytest.raises(PermanentError, match="returned a vector that is not float32 base64"):
        provider_for(server).embed_batch(["alpha"])


def openai_model(server: FakeOpenAI, **fields: object) -> ModelSettings:
    values: dict[str, object] = {
        "provider": "openai",
        "model": "text-embedding-test",
        "dimensions": 8,
        "base_url": server.url,
        "timeout": 2.0,
    }
    return ModelSettings.model_validate({**values, **fields})


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
