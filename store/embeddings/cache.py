"""The embedding cache: vectors in Redis, keyed by sha256(model, dimensions, text), with a TTL.

Values are float32 little-endian bytes (never pickle), so a cached vector comes
back at float32 precision, the precision pgvector and Qdrant store anyway. A lookup is one MGET and
a write one pipeline, whatever the number of texts. The cache only ever makes
things faster: any Redis error is logged (at most once a minute) and the
cache is skipped for a short pause, so indexing goes on without it.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from store.connect.redis import REDIS_ERRORS, redis_client
from store.contract import CACHE_KEY_PREFIX
from store.settings import NetworkSettings

__all__ = [
    "DEFAULT_KEY_PREFIX",
    "DEFAULT_PAUSE_SECONDS",
    "DEFAULT_SOCKET_TIMEOUT",
    "EmbeddingCache",
    "cache_key",
    "from_bytes",
    "to_bytes",
]

log = logging.getLogger(__name__)

#: Every cache key starts with this.
DEFAULT_KEY_PREFIX = CACHE_KEY_PREFIX
#: Seconds Redis gets to connect or answer before the cache is skipped.
DEFAULT_SOCKET_TIMEOUT = 0.5
#: Seconds the cache is skipped after a Redis error, so a dead Redis costs no time per call.
DEFAULT_PAUSE_SECONDS = 5.0
#: Seconds between two warnings about Redis errors.
WARN_EVERY_SECONDS = 60.0
_FLOAT32_LE = np.dtype("<f4")


def cache_key(model: str, dimensions: int, text: str, *, prefix: str = DEFAULT_KEY_PREFIX) -> str:
    """The key of ``text`` embedded by ``model`` at ``dimensions``."""
    digest = hashlib.sha256(f"{model}\0{dimensions}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()
    return prefix + digest


def to_bytes(vector: Sequence[float]) -> bytes:
    """``vector`` as float32 little-endian bytes."""
    return np.asarray(vector, dtype=_FLOAT32_LE).tobytes()


def from_bytes(data: bytes) -> list[float]:
    """The vector ``to_bytes`` made."""
    result: list[float] = np.frombuffer(data, dtype=_FLOAT32_LE).tolist()
    return result


class EmbeddingCache:
    """Vectors by (model, dimensions, text) in Redis; see the module docstring."""

    def __init__(
        self,
        client: Any,
        *,
        ttl_seconds: float,
        prefix: str = DEFAULT_KEY_PREFIX,
        pause_seconds: float = DEFAULT_PAUSE_SECONDS,
    ) -> None:
        self.client = client
        self.ttl_seconds = max(int(ttl_seconds), 1)
        self.prefix = prefix
        self.pause_seconds = pause_seconds
        self._paused_until = 0.0
        self._warned_at = -WARN_EVERY_SECONDS
        self._lock = threading.Lock()

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        ttl_seconds: float,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
        network: NetworkSettings | None = None,
        **options: Any,
    ) -> EmbeddingCache:
        """A cache on the Redis at ``url``; connects on first use, with short timeouts, and TCP keepalive and
        health checks as ``network`` says (None: the defaults)."""
        client = redis_client(url, network, timeout=socket_timeout)
        return cls(client, ttl_seconds=ttl_seconds, **options)

    def __repr__(self) -> str:
        return f"<EmbeddingCache prefix={self.prefix!r} ttl={self.ttl_seconds}s>"

    def get_many(self, model: str, dimensions: int, texts: Sequence[str]) -> list[list[float] | None]:
        """The cached vector of each text, or None; all None when Redis fails. One round trip."""
        if not texts or self._paused():
            return [None] * len(texts)
        keys = [cache_key(model, dimensions, text, prefix=self.prefix) for text in texts]
        try:
            values = self.client.mget(keys)
        except REDIS_ERRORS as exc:
            self._failed(exc)
            return [None] * len(texts)
        return [self._decode(value, dimensions) for value in values]

    def put_many(self, model: str, dimensions: int, items: Sequence[tuple[str, Sequence[float]]]) -> None:
        """Store each (text, vector) for ``ttl_seconds``; a Redis failure is logged, not raised."""
        if not items or self._paused():
            return
        try:
            pipe = self.client.pipeline(transaction=False)
            for text, vector in items:
                pipe.set(
                    cache_key(model, dimensions, text, prefix=self.prefix),
                    to_bytes(vector),
                    ex=self.ttl_seconds,
                )
            pipe.execute()
        except REDIS_ERRORS as exc:
            self._failed(exc)

    def close(self) -> None:
        """Close the connection pool."""
        self.client.close()

    @staticmethod
    def _decode(value: bytes | None, dimensions: int) -> list[float] | None:
        # A value of another size (another writer, a truncated write) is a miss, not an error.
        if value is None or len(value) != dimensions * _FLOAT32_LE.itemsize:
            return None
        vector = np.frombuffer(value, dtype=_FLOAT32_LE)
        if not np.isfinite(vector).all():  # a poisoned entry (an older writer's NaN): embed the text again
            return None
        return from_bytes(value)

    def _paused(self) -> bool:
        return time.monotonic() < self._paused_until

    def _failed(self, exc: Exception) -> None:
        now = time.monotonic()
        with self._lock:
            self._paused_until = now + self.pause_seconds
            if now - self._warned_at < WARN_EVERY_SECONDS:
                return
            self._warned_at = now
        log.warning("embedding cache unavailable (%s: %s); embedding without it for now", type(exc).__name__, exc)
