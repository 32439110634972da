"""Coalescing of repeated enqueues: a record already queued and not yet started is not queued again.

A Redis key per queued record, set by the producer with SET NX and removed by
the worker when the task starts (before it reads the source, so a change made
after that read enqueues anew). The key expires, so a lost message blocks
nothing for long; the reconcile sweep heals the rest. Without a Redis cache
URL (a RabbitMQ broker and no ``[cache] url``) nothing is coalesced.
"""

from __future__ import annotations

import logging

from store.connect.redis import REDIS_ERRORS, redis_client
from store.contract import REDIS_SCHEMES, pending_key
from store.settings import NetworkSettings

__all__ = ["Coalescer"]

log = logging.getLogger(__name__)


class Coalescer:
    """Claims and releases the "queued" mark of records."""

    def __init__(self, url: str | None, *, ttl_seconds: int, network: NetworkSettings | None = None) -> None:
        """``network``: keepalive and health checks of the Redis connections (None: the defaults)."""
        usable = bool(url) and url.startswith(REDIS_SCHEMES) and ttl_seconds > 0  # type: ignore[union-attr]
        self.ttl = ttl_seconds
        self.client = None
        if usable:
            assert url is not None
            self.client = redis_client(url, network, timeout=1)

    def claim(self, collection: str, record_id: str) -> bool:
        """True when the caller should enqueue (nothing queued for this record yet)."""
        if self.client is None:
            return True
        try:
            return bool(self.client.set(pending_key(collection, record_id), 1, nx=True, ex=self.ttl))
        except REDIS_ERRORS as exc:
            log.warning("coalescing off, Redis failed: %s", exc)
            return True

    def queued(self, collection: str, record_id: str) -> bool | None:
        """Whether the record's "queued" mark is set; None when nothing is coalesced or Redis cannot say."""
        if self.client is None:
            return None
        try:
            return bool(self.client.exists(pending_key(collection, record_id)))
        except REDIS_ERRORS as exc:
            log.warning("could not read the queued mark of %s/%s: %s", collection, record_id, exc)
            return None

    def release(self, collection: str, record_id: str) -> None:
        """The record's task has started: later changes must enqueue again."""
        if self.client is None:
            return
        try:
            self.client.delete(pending_key(collection, record_id))
        except REDIS_ERRORS as exc:
            log.warning("could not clear the queued mark of %s/%s: %s", collection, record_id, exc)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
