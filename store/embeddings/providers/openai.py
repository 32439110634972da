"""The ``openai`` provider: OpenAI's embeddings API, or any endpoint that speaks it.

Azure OpenAI, Mistral, Gemini's compatible API, Ollama's ``/v1``, vLLM and TEI
all work through ``base_url`` (Azure when ``api_version`` is set). The client's
own retries are off: the failover chain owns retries. openai's exceptions are
translated here and nowhere else.

Vectors travel as base64 little-endian float32: 5.3 bytes a value instead of a
JSON float's 12 or more, and no per-float parsing. With the fallback remembered:
an endpoint that refuses base64 (a 400/422 naming the encoding format or base64)
gets the same batch again as float at once, one that answers floats anyway is
taken at its word, and either way this provider asks it for float from then on.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, cast
from urllib.parse import urlsplit

import numpy as np

from store.calls.http import error_for_status, parse_retry_after, scrub
from store.embeddings.providers.base import Limits, Vectors
from store.errors import ConfigError, EmbeddingError, PermanentError, TransientError
from store.settings.urls import redact_url

if TYPE_CHECKING:
    from store.settings import ModelSettings

__all__ = [
    "DEFAULT_OPENAI_URL",
    "OpenAIProvider",
    "decode_vector",
    "error_detail",
    "make_client",
    "refuses_base64",
    "translate_error",
    "usage_tokens",
]

log = logging.getLogger(__name__)

#: How vectors travel: base64 float32 (compact), or JSON floats (what every endpoint speaks).
EncodingFormat = Literal["base64", "float"]

#: Where the ``openai`` provider goes when ``base_url`` is not set.
DEFAULT_OPENAI_URL = "https://api.openai.com/v1"
#: The key's variable when ``api_key_env`` is not set; endpoints that take no key get "unused".
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
#: What an error says when the endpoint refused the encoding format rather than the texts.
_FORMAT_REFUSED = re.compile(r"encoding[ _-]?format|base64", re.IGNORECASE)


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
        #: "base64" until the endpoint shows it takes float only; set "float" to force JSON floats.
        self.encoding_format: EncodingFormat = "base64"
        self._format_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<OpenAIProvider {self.name!r} {self.model!r} at {self.endpoint}>"

    def embed_batch(self, texts: list[str]) -> Vectors:
        """One vector per text, sorted by the response's ``index``, with the tokens its ``usage`` counted (None
        when the endpoint reports none); see ``Provider.embed_batch``."""
        import openai

        try:
            response = self._request(texts)
        except openai.OpenAIError as exc:
            raise self._translate(exc) from exc
        return Vectors(self._in_order(response.data, len(texts)), tokens=usage_tokens(response))

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    def _request(self, texts: list[str]) -> Any:
        """The response, its items as base64 unless the endpoint takes float only.

        A refused base64 is not the batch's failure: the same batch goes again as float at once.
        """
        import openai

        if self.encoding_format == "float":
            return self._create(texts, "float")
        try:
            response = self._create(texts, "base64")
        except openai.APIStatusError as exc:
            if not refuses_base64(exc):
                raise
            response = self._create(texts, "float")
            self._use_float(f"it refused base64 with {exc.status_code}")
            return response
        if any(not isinstance(item.embedding, str) for item in response.data):
            self._use_float("it answered floats when asked for base64")
        return response

    def _create(self, texts: list[str], encoding_format: EncodingFormat) -> Any:
        """One ``/embeddings`` call; with "base64" the client leaves each embedding a base64 string."""
        extra: dict[str, Any] = {"dimensions": self.dimensions} if self._send_dimensions else {}
        return self._client.embeddings.create(input=texts, model=self.model, encoding_format=encoding_format, **extra)

    def _use_float(self, reason: str) -> None:
        """Ask this endpoint for float from now on; said once at INFO (the endpoint is already redacted)."""
        with self._format_lock:
            if self.encoding_format == "float":
                return
            self.encoding_format = "float"
        log.info(
            "model %r at %s takes float embeddings only (%s): asking it for float from now on",
            self.model,
            self.endpoint,
            reason,
        )

    def _translate(self, exc: Exception) -> EmbeddingError:
        return translate_error(
            exc, model=self.model, endpoint=self.endpoint, api_key=getattr(self._client, "api_key", None)
        )

    def _in_order(self, data: Sequence[Any], count: int) -> list[list[float]]:
        by_index = {item.index: item.embedding for item in data}
        if len(data) != count or sorted(by_index) != list(range(count)):
            raise PermanentError(
                f"model {self.model!r} at {self.endpoint} returned {len(data)} vectors "
                f"(indexes {sorted(by_index)[:10]}) for {count} texts"
            )
        try:
            return [decode_vector(by_index[index]) for index in range(count)]
        except ValueError as exc:
            raise PermanentError(
                f"model {self.model!r} at {self.endpoint} returned a vector that is not float32 base64: {exc}"
            ) from None


def usage_tokens(response: Any) -> int | None:
    """The input tokens a response's ``usage`` counted; None when it has none (some compatible servers)."""
    usage = getattr(response, "usage", None)
    tokens = getattr(usage, "prompt_tokens", None)
    return tokens if isinstance(tokens, int) and tokens >= 0 else None


def decode_vector(embedding: str | Sequence[float]) -> list[float]:
    """A vector from a base64 string of little-endian float32 values, or from a list of floats as is.

    Raises ValueError when the string is not base64 or not a whole number of float32 values.
    """
    if isinstance(embedding, str):
        return cast("list[float]", np.frombuffer(base64.b64decode(embedding, validate=True), dtype="<f4").tolist())
    return list(embedding)


def refuses_base64(exc: Exception) -> bool:
    """Whether an openai error is an endpoint refusing base64 (a 400/422 naming the encoding format)."""
    import openai

    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 422):
        return False
    return bool(_FORMAT_REFUSED.search(f"{exc.message} {exc.body}"))


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
            f"models.{name} uses provider 'openai', which needs the openai package: pip install 'vectorsync[openai]'"
        ) from None
    api_key = _api_key(name=name, settings=settings)
    if settings.api_version is None:
        return openai.OpenAI(base_url=settings.base_url, api_key=api_key, max_retries=0, timeout=settings.timeout)
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
