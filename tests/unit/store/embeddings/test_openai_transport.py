"""How vectors travel from an OpenAI-compatible endpoint: base64 float32, with a remembered float fallback.

All through the real openai client against the fake server.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import numpy as np
import pytest

from store.embeddings import Embeddings
from store.embeddings.providers.openai import OpenAIProvider, decode_vector
from store.errors import InputError, PermanentError
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
