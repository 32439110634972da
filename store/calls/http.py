"""A model call over HTTP, for every provider that speaks to a server with httpx (and the status mapping the openai
client's errors take too): a timeout or a connection that failed is a TransientError, a status other than 200
the error it stands for (``retry_after`` from the server's Retry-After), and what a message quotes of an answer
is scrubbed of keys. httpx is imported only when a call is made."""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from store.errors import ConfigError, EmbeddingError, InputError, PermanentError, TransientError

if TYPE_CHECKING:
    import httpx

__all__ = [
    "INPUT_STATUSES",
    "RETRYABLE_STATUSES",
    "client",
    "error_for_status",
    "parse_retry_after",
    "post",
    "scrub",
]

#: What an API key looks like inside a server's error message (OpenAI's "sk-...", bearer tokens).
_KEYLIKE = re.compile(r"\b(sk-|Bearer )[A-Za-z0-9_\-*.]{6,}", re.IGNORECASE)

#: Status codes worth retrying besides 5xx: request timeout, conflict, rate limit.
RETRYABLE_STATUSES = frozenset({408, 409, 429})
#: Status codes that mean the input itself was refused.
INPUT_STATUSES = frozenset({400, 413, 422})


def client(model: str, provider: str, base_url: str, *, timeout: float, key: str | None) -> httpx.Client:
    """An httpx client for ``models.<model>`` at ``base_url``, with ``key`` as its bearer token; a ConfigError naming
    the extra to install where httpx is missing."""
    try:
        import httpx
    except ImportError:
        raise ConfigError(
            f"models.{model} uses provider {provider!r}, which needs httpx: pip install 'vectorsync[openai]'"
        ) from None
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=base_url, timeout=timeout, headers=headers)


def post(
    client: httpx.Client,
    path: str,
    body: dict[str, Any],
    *,
    model: str,
    endpoint: str,
    detail: Callable[[httpx.Response], str],
) -> httpx.Response:
    """``client``'s POST of ``body`` to ``path``, answered 200; else the error the failure stands for, naming
    ``model`` at ``endpoint`` and, for a status, the answer's ``detail`` (scrubbed by the caller, who holds the key)."""
    import httpx

    try:
        response = client.post(path, json=body)
    except httpx.TimeoutException as exc:
        raise TransientError(f"model {model!r} at {endpoint} timed out") from exc
    except httpx.TransportError as exc:
        raise TransientError(f"model {model!r} at {endpoint} could not be reached: {type(exc).__name__}") from exc
    if response.status_code != 200:
        raise error_for_status(
            response.status_code,
            model=model,
            endpoint=endpoint,
            detail=detail(response),
            retry_after=parse_retry_after(response.headers),
        )
    return response


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
