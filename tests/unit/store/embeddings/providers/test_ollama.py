"""The ollama provider against the fake server: Ollama's native /api/embed, its errors translated."""

from __future__ import annotations

import pytest

from store.embeddings.providers.fake import hash_embed
from store.embeddings.providers.ollama import OllamaProvider
from store.errors import InputError, PermanentError, TransientError
from store.settings import ModelSettings
from tests.fake_openai import FakeOpenAI


def ollama_model(server: FakeOpenAI, **fields: object) -> ModelSettings:
    values = {"provider": "ollama", "model": "nomic-embed-text", "dimensions": 8, "base_url": server.root}
    return ModelSettings.model_validate({**values, **fields, "timeout": fields.get("timeout", 2.0)})


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
