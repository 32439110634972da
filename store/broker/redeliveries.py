"""How many times a task's message came back to a worker.

A task killed at its hard time limit, or whose pool process died under it (out of memory, a crash in a native
library, kill -9), goes back to its queue (``task_acks_late``, ``task_reject_on_worker_lost``,
``task_acks_on_timeout`` off), so that no batch is lost with its worker. A message that kills its worker every
time would come back for ever, and its run would never end. Each redelivery is counted here, in the cache's
Redis, so that a task gives up on a message after ``worker.max_redeliveries`` (``worker.tasks.retries``).

Without a Redis cache (a RabbitMQ broker and no ``[cache] url``) nothing is counted; a RabbitMQ quorum
queue's ``x-delivery-limit`` does the same there.
"""

from __future__ import annotations

import logging
from typing import Any

from store.connect.redis import REDIS_ERRORS, redis_client
from store.contract import REDELIVERED_KEY_PREFIX, REDIS_SCHEMES
from store.settings import NetworkSettings

__all__ = ["Redeliveries"]

log = logging.getLogger(__name__)


class Redeliveries:
    """Counts the redeliveries of each attempt of a task's message, in keys that expire after ``ttl_seconds``."""

    def __init__(self, url: str | None, *, ttl_seconds: int, network: NetworkSettings | None = None) -> None:
        self.ttl = ttl_seconds
        self.client: Any = None
        if url and url.startswith(REDIS_SCHEMES):
            self.client = redis_client(url, network, timeout=1)

    def count(self, message_id: str, attempt: int) -> int:
        """Count one more redelivery of ``attempt`` (its retries so far) of message ``message_id``: how many so
        far, this one included; 0 when nothing counts (no Redis, or it failed: the task then runs as before)."""
        if self.client is None:
            return 0
        key = f"{REDELIVERED_KEY_PREFIX}{message_id}:{attempt}"
        try:
            with self.client.pipeline() as pipe:
                pipe.incr(key)
                pipe.expire(key, self.ttl)
                times, _ = pipe.execute()
        except REDIS_ERRORS as exc:
            log.warning("could not count a redelivery of %s: %s", message_id, exc)
            return 0
        return int(times)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
