"""The provider seam: one method that embeds one batch, and the helpers every provider shares.

A provider turns a list of texts into a list of vectors in one call, and maps
its driver's failures onto the error tree: ``TransientError`` (429, 5xx,
timeouts, connection errors; ``retry_after`` when the server said so),
``PermanentError`` (401, 403, 404) and ``InputError`` (400, 413, 422). Retries,
failover, batching and checking the vectors are done once, above the providers
(``failover``, ``batching``). ``providers.fake`` is the reference.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from store.errors import EmbeddingError, InputError, PermanentError, TransientError
from store.settings import ModelSettings, default

__all__ = [
    "DEFAULT_LIMITS",
    "Limits",
    "Provider",
    "Vectors",
    "error_for_status",
    "parse_retry_after",
    "scrub",
]

#: What an API key looks like inside a server's error message (OpenAI's "sk-...", bearer tokens).
_KEYLIKE = re.compile(r"\b(sk-|Bearer )[A-Za-z0-9_\-*.]{6,}", re.IGNORECASE)

#: Status codes worth retrying besides 5xx: request timeout, conflict, rate limit.
RETRYABLE_STATUSES = frozenset({408, 409, 429})
#: Status codes that mean the input itself was refused.
INPUT_STATUSES = frozenset({400, 413, 422})


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """How much one provider call may carry: inputs, estimated tokens per call and per input."""

    max_inputs: int = default(ModelSettings, "max_inputs")
    max_tokens_per_request: int = default(ModelSettings, "max_tokens_per_request")
    max_tokens_per_input: int = default(ModelSettings, "max_tokens_per_input")

    @classmethod
    def from_settings(cls, settings: ModelSettings) -> Limits:
        return cls(
            max_inputs=settings.max_inputs,
            max_tokens_per_request=settings.max_tokens_per_request,
            max_tokens_per_input=settings.max_tokens_per_input,
        )

    def tightest(self, other: Limits) -> Limits:
        """The limits that satisfy both ``self`` and ``other``."""
        return Limits(
            max_inputs=min(self.max_inputs, other.max_inputs),
            max_tokens_per_request=min(self.max_tokens_per_request, other.max_tokens_per_request),
            max_tokens_per_input=min(self.max_tokens_per_input, other.max_tokens_per_input),
        )


#: The limits of OpenAI's embeddings endpoint, the defaults of ``ModelSettings``.
DEFAULT_LIMITS = Limits()


class Vectors(list[list[float]]):
    """What ``embed_batch`` may return instead of a plain list: the vectors, and the tokens the provider counted
    for the call (OpenAI's ``usage``, a local model's tokenizer). A plain list, or ``tokens`` None, leaves the
    count to the chain (``store.calls.tokens.token_counter``). A value per call, so parallel calls never mix."""

    __slots__ = ("tokens",)

    def __init__(self, vectors: Iterable[list[float]] = (), *, tokens: int | None = None) -> None:
        super().__init__(vectors)
        self.tokens = tokens


class Provider(Protocol):
    """One embedding model at one endpoint."""

    #: The ``[models.NAME]`` this provider was built from.
    name: str
    #: The model's name as the API knows it; recorded with every vector it makes.
    model: str
    dimensions: int
    limits: Limits
    #: Where the model is served, for messages: a URL without credentials, or "local".
    endpoint: str

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order, in one call; a ``Vectors`` when the provider counts the call's tokens.

        Raises TransientError (with ``retry_after`` when the server sent one),
        PermanentError, InputError; messages name the model and the endpoint,
        never a key.
        """
        ...


def error_for_status(
    status: int, *, model: str, endpoint: str, detail: str, retry_after: float | None = None
) -> EmbeddingError:
    """The error an HTTP ``status`` from an embeddings endpoint stands for."""
    message = f"model {model!r} at {endpoint} answered {status}: {detail}"
    if status in RETRYABLE_STATUSES or status >= 500:
        return TransientError(message, retry_after=retry_after, rate_limited=status == 429)
    if status in INPUT_STATUSES:
        return InputError(message)
    return PermanentError(message)


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def scrub(text: str, *secrets: str | None) -> str:
    """``text`` with the given secrets and anything that looks like an API key masked."""
    for secret in secrets:
        if secret and secret != "unused":
            text = text.replace(secret, "***")
    return _KEYLIKE.sub(r"\1***", text)
