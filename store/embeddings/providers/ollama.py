"""The ``ollama`` provider: Ollama's native ``POST /api/embed``, over httpx.

Ollama also serves the OpenAI API at ``/v1`` (use provider ``openai`` with
``base_url = "http://127.0.0.1:11434/v1"``); the native endpoint is here because
it can refuse over-long input (``truncate: false``) instead of cutting it
silently. httpx's exceptions are translated by ``store.calls.http``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from store.calls import http
from store.calls.http import post, scrub
from store.embeddings.providers.base import Limits
from store.errors import PermanentError
from store.settings.urls import redact_url

if TYPE_CHECKING:
    import httpx

    from store.settings import ModelSettings

__all__ = ["DEFAULT_OLLAMA_URL", "OllamaProvider"]

#: Where a local Ollama listens.
DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"


class OllamaProvider:
    """One model served by Ollama (or anything speaking its ``/api/embed``)."""

    def __init__(self, *, name: str, settings: ModelSettings, client: httpx.Client | None = None) -> None:
        self.name = name
        self.model = settings.model
        self.dimensions = settings.dimensions
        self.limits = Limits.from_settings(settings)
        base_url = (settings.base_url or DEFAULT_OLLAMA_URL).rstrip("/")
        self.endpoint = redact_url(base_url)
        self._send_dimensions = settings.send_dimensions
        self._key = os.environ.get(settings.api_key_env) if settings.api_key_env else None
        self._client = (
            client
            if client is not None
            else http.client(name, "ollama", base_url, timeout=settings.timeout, key=self._key)
        )

    def __repr__(self) -> str:
        return f"<OllamaProvider {self.name!r} {self.model!r} at {self.endpoint}>"

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        """One vector per text; see ``Provider.embed_batch``."""
        body: dict[str, Any] = {"model": self.model, "input": texts, "truncate": False}
        if self._send_dimensions:
            body["dimensions"] = self.dimensions
        response = post(
            self._client,
            "/api/embed",
            body,
            model=self.model,
            endpoint=self.endpoint,
            detail=lambda answer: scrub(_detail(answer), self._key),
        )
        return self._vectors(response)

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    def _vectors(self, response: httpx.Response) -> list[list[float]]:
        try:
            vectors = response.json()["embeddings"]
        except (ValueError, KeyError, TypeError) as exc:
            raise PermanentError(f"model {self.model!r} at {self.endpoint} answered without 'embeddings'") from exc
        if not isinstance(vectors, list):
            raise PermanentError(f"model {self.model!r} at {self.endpoint} answered a non-list 'embeddings'")
        return vectors


def _detail(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    return str(error)[:300] if error else response.reason_phrase or "no detail"
