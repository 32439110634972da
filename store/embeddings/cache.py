"""The embedding cache: vectors in Redis, keyed by sha256(scope, model, dimensions, sha256(text)), with a TTL.

The scope is a collection's name unless it shares the pool (``[collections.NAME] cache = "shared"``): a text
erased from one collection leaves no vector another is served, and its key can be found again from the hash a
stored chunk keeps (``hashed_key``), so an erasure deletes it (``forget_many``).

Values are float32 little-endian bytes (never pickle), so a cached vector comes
back at float32 precision, the precision pgvector and Qdrant store anyway. A lookup is one MGET and
a write (a provider call's vectors) one pipeline, whatever the number of texts. The cache only ever makes
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
from store.settings import CollectionSettings, NetworkSettings
from store.settings.collection_names import parse_name
from store.vectors.records import text_digest

__all__ = [
    "DEFAULT_KEY_PREFIX",
    "DEFAULT_PAUSE_SECONDS",
    "DEFAULT_SOCKET_TIMEOUT",
    "EmbeddingCache",
    "cache_key",
    "cache_scope",
    "from_bytes",
    "hashed_key",
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


def cache_key(model: str, dimensions: int, text: str, *, prefix: str = DEFAULT_KEY_PREFIX, scope: str = "") -> str:
    """The key of ``text`` embedded by ``model`` at ``dimensions``, in ``scope``: a collection's own vectors are
    found by it alone (``""``: the pool collections share when they opt in, and queries)."""
    return hashed_key(model, dimensions, text_digest(text), prefix=prefix, scope=scope)


def hashed_key(model: str, dimensions: int, digest: str, *, prefix: str = DEFAULT_KEY_PREFIX, scope: str = "") -> str:
    """``cache_key`` from the text's ``text_digest``: what a stored chunk keeps, so its entry can be erased."""
    keyed = f"{scope}\0{model}\0{dimensions}\0{digest}"
    return prefix + hashlib.sha256(keyed.encode("utf-8", "surrogatepass")).hexdigest()


def cache_scope(settings: CollectionSettings, collection: str) -> str:
    """The cache scope of ``collection`` (a generation's name gives its collection's): its own name, or "" for
    the pool ``[collections.NAME] cache = "shared"`` joins."""
    return "" if settings.cache == "shared" else parse_name(collection)[0]


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

    def get_many(
        self, model: str, dimensions: int, texts: Sequence[str], *, scope: str = ""
    ) -> list[list[float] | None]:
        """The cached vector of each text in ``scope``, or None; all None when Redis fails. One round trip."""
        if not texts or self._paused():
            return [None] * len(texts)
        keys = [cache_key(model, dimensions, text, prefix=self.prefix, scope=scope) for text in texts]
        try:
            values = self.client.mget(keys)
        except REDIS_ERRORS as exc:
            self._failed(exc)
            return [None] * len(texts)
        return [self._decode(value, dimensions) for value in values]

    def put_many(
        self, model: str, dimensions: int, items: Sequence[tuple[str, Sequence[float]]], *, scope: str = ""
    ) -> None:
        """Store each (text, vector) in ``scope`` for ``ttl_seconds``; a Redis failure is logged, not raised."""
        if not items or self._paused():
            return
        try:
            pipe = self.client.pipeline(transaction=False)
            for text, vector in items:
                pipe.set(
                    cache_key(model, dimensions, text, prefix=self.prefix, scope=scope),
                    to_bytes(vector),
                    ex=self.ttl_seconds,
                )
            pipe.execute()
        except REDIS_ERRORS as exc:
            self._failed(exc)

    def forget_many(self, models: Sequence[str], dimensions: int, digests: Sequence[str], *, scope: str) -> int:
        """Delete the vectors of the texts of ``digests`` (``text_digest``) in ``scope`` under each of ``models``
        (erasure); how many keys went. Raises StoreUnavailable when Redis fails: an erasure must not pass for
        done."""
        from store.errors import StoreUnavailable

        keys = [hashed_key(m, dimensions, d, prefix=self.prefix, scope=scope) for m in models for d in digests]
        if not keys:
            return 0
        try:
            return int(self.client.delete(*keys))
        except REDIS_ERRORS as exc:
            raise StoreUnavailable(f"the embedding cache did not answer ({type(exc).__name__}): {exc}") from exc

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
