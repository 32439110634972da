"""The version of a pushed document: read from one clock every producer shares, so that an edit or a delete sent
from a host whose clock is behind the previous sender's still supersedes it.

A worker drops a pushed version older than the one its ledger holds (two sends of one document may be taken
by two workers in either order). Versions were each sender's ``time.time_ns()``: a host 10 s behind another
had its edits and deletes dropped as superseded. Now they come from the cache's Redis (``[cache] url``, else
the broker's): its clock, in nanoseconds as before, and never at or below the last version it gave, so a
step back of that clock loses nothing either. Without a Redis (a RabbitMQ broker and no ``[cache] url``) this
process's clock is used, made monotonic here, and a warning says what that risks; an app that orders its
documents itself passes ``version=``.
"""

from __future__ import annotations

import logging
import threading
import time

import redis

from store.connect.redis import redis_client, unavailable
from store.contract import REDIS_SCHEMES
from store.settings import NetworkSettings
from store.settings.urls import redact_url

__all__ = ["CLOCK_KEY", "DocumentClock"]

log = logging.getLogger(__name__)

#: The Redis key of the last version given, in microseconds.
CLOCK_KEY = "vectorsync:document-clock"

# Microseconds stay exact in Lua's doubles (below 2**53) where nanoseconds would not.
_NEXT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
if now <= last then now = last + 1 end
redis.call('SET', KEYS[1], string.format('%d', now))
return now
"""


class DocumentClock:
    """Gives increasing versions for pushed documents, shared by every producer of one Redis."""

    def __init__(self, url: str | None, *, network: NetworkSettings | None = None, shared: bool = True) -> None:
        """``url``: the cache's Redis; ``shared``: whether other hosts send (False for an in-process broker,
        where this process's clock is the only one and no warning is due)."""
        self.client: redis.Redis | None = None
        self.url = url
        if url and url.startswith(REDIS_SCHEMES):
            self.client = redis_client(url, network, timeout=None)
            self._script = self.client.register_script(_NEXT)
        elif shared:
            log.warning(
                "pushed documents are versioned by this host's clock, as no Redis is configured: an edit "
                "sent from a host whose clock is behind the previous sender's is dropped. Set [cache] url "
                "to a Redis every producer reaches, or pass version= to index_document"
            )
        self._lock = threading.Lock()
        self._last = 0

    def next(self) -> int:
        """A version above every one given before. Raises StoreUnavailable when the Redis cannot be reached."""
        if self.client is None:
            with self._lock:
                self._last = max(time.time_ns(), self._last + 1)
                return self._last
        with unavailable(
            f"the clock of pushed documents in Redis ({redact_url(self.url or '')}) cannot be read",
            "send the document again once Redis answers",
        ):
            return int(self._script(keys=[CLOCK_KEY])) * 1000

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
