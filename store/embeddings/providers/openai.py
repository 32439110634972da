"""The ``openai`` provider: OpenAI's embeddings API, or any endpoint that speaks it.

Azure OpenAI, Mistral, Gemini's compatible API, Ollama's ``/v1``, vLLM and TEI
all work through ``base_url`` (Azure when ``api_version`` is set). The client's
own retries are off: the failover chain owns retries. openai's exceptions are
translated here and nowhere else.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from store.embeddings.providers.base import Limits, error_for_status, parse_retry_after, scrub
from store.errors import ConfigError, EmbeddingError, PermanentError, TransientError
from store.urls import redact_url

if TYPE_CHECKING:
    from store.settings import ModelSettings

__all__ = ["DEFAULT_OPENAI_URL", "OpenAIProvider", "error_detail", "make_client", "translate_error"]

#: Where the ``openai`` provider goes when ``base_url`` is not set.
DEFAULT_OPENAI_URL = "https://api.openai.com/v1"
#: The key's variable when ``api_key_env`` is not set; endpoints that take no key get "unused".
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"


class OpenAIProvider:
    """One model behind an OpenAI-compatible ``/embeddings`` endpoint."""

    def __init__(self, *, name: str, settings: ModelSettings, client: Any = None) -> None:
        self.name = name
        self.model = settings.model
        self.dimensions = settings.dimensions
        self.limits = Limits.from_settings(settings)
        self.endpoint = redact_url(settings.base_url or DEFAULT_OPENAI_URL)
        self._send_dimensions = settings.send_dimensions
        self._client = client if client is not None else make_client(name=name, settings=settings)

    def __repr__(self) -> str:
        return f"<OpenAIProvider {self.name!r} {self.model!r} at {self.endpoint}>"

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, sorted by the response's ``index``; see ``Provider.embed_batch``."""
        import openai

        extra: dict[str, Any] = {"dimensions": self.dimensions} if self._send_dimensions else {}
        try:
            response = self._client.embeddings.create(
                input=texts, model=self.model, encoding_format="float", **extra
            )
        except openai.OpenAIError as exc:
            raise self._translate(exc) from exc
        return self._in_order(response.data, len(texts))

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    def _translate(self, exc: Exception) -> EmbeddingError:
        return translate_error(exc, model=self.model, endpoint=self.endpoint,
                               api_key=getattr(self._client, "api_key", None))

    def _in_order(self, data: Sequence[Any], count: int) -> list[list[float]]:
        by_index = {item.index: item.embedding for item in data}
        if len(data) != count or sorted(by_index) != list(range(count)):
            raise PermanentError(
                f"model {self.model!r} at {self.endpoint} returned {len(data)} vectors "
                f"(indexes {sorted(by_index)[:10]}) for {count} texts"
            )
        return [list(by_index[index]) for index in range(count)]


def translate_error(exc: Exception, *, model: str, endpoint: str, api_key: str | None) -> EmbeddingError:
    """The error of the tree an openai client exception stands for; messages name the model, never the key."""
    import openai

    where = f"model {model!r} at {endpoint}"
    if isinstance(exc, openai.APITimeoutError):
        return TransientError(f"{where} timed out")
    if isinstance(exc, openai.APIConnectionError):
        return TransientError(f"{where} could not be reached: {type(exc.__cause__ or exc).__name__}")
    if isinstance(exc, openai.APIStatusError):
        return error_for_status(
            exc.status_code,
            model=model,
            endpoint=endpoint,
            detail=scrub(error_detail(exc), api_key),
            retry_after=parse_retry_after(exc.response.headers),
        )
    return PermanentError(f"{where} gave an unusable answer: {type(exc).__name__}")


def make_client(*, name: str, settings: ModelSettings) -> Any:
    """An ``OpenAI`` (or ``AzureOpenAI`` when ``api_version`` is set) client with retries off."""
    try:
        import openai
    except ImportError:
        raise ConfigError(
            f"models.{name} uses provider 'openai', which needs the openai package: "
            "pip install 'vectorsync[openai]'"
        ) from None
    api_key = _api_key(name=name, settings=settings)
    if settings.api_version is None:
        return openai.OpenAI(
            base_url=settings.base_url, api_key=api_key, max_retries=0, timeout=settings.timeout
        )
    if not settings.base_url:
        raise ConfigError(
            f"models.{name} sets api_version, so it is Azure OpenAI: set models.{name}.base_url "
            "to the resource endpoint (https://NAME.openai.azure.com)"
        )
    return openai.AzureOpenAI(
        azure_endpoint=settings.base_url,
        api_version=settings.api_version,
        api_key=api_key,
        max_retries=0,
        timeout=settings.timeout,
    )


def _api_key(*, name: str, settings: ModelSettings) -> str:
    if settings.api_key_env is None:
        # OPENAI_API_KEY is OpenAI's: it goes to OpenAI's endpoint only, never to another base_url.
        return (os.environ.get(DEFAULT_API_KEY_ENV) if _is_openai(settings.base_url) else None) or "unused"
    key = os.environ.get(settings.api_key_env)
    if not key:
        raise ConfigError(
            f"models.{name}.api_key_env names {settings.api_key_env}, which is not set: "
            f"export {settings.api_key_env}=... or remove api_key_env for an endpoint that takes no key"
        )
    return key


def _is_openai(base_url: str | None) -> bool:
    return base_url is None or urlsplit(base_url).hostname == urlsplit(DEFAULT_OPENAI_URL).hostname


def error_detail(exc: Any) -> str:
    """The message an API error carries, cut to 300 characters."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, dict) else error
        if message:
            return str(message)[:300]
    return type(exc).__name__
