"""How fresh each collection's index is: the seconds from a change to the commit that made it searchable.

A worker measures each change it makes searchable (``worker.metrics.latency``): a captured change from its outbox row's
time (taken inside the writer's transaction), an app's enqueue from its send. Prometheus gets a histogram; so
that ``vectorsync status`` can say the last hour's p50 and p95 without a Prometheus, the worker also keeps the
newest ``KEPT`` samples of each collection in the cache's Redis, each with when it was taken. Without a Redis
cache nothing is kept, and ``status`` says so.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from store.connect.redis import REDIS_ERRORS, redis_client
from store.contract import FRESHNESS_KEY_PREFIX, REDIS_SCHEMES
from store.settings import NetworkSettings

__all__ = ["KEPT", "Freshness", "FreshnessLog", "quantile"]

log = logging.getLogger(__name__)

#: Samples kept per collection: the newest, so a busy hour is summarised by its last ``KEPT`` changes.
KEPT = 10_000
#: Seconds a collection's samples are kept after its last change (``status`` reads the last hour).
TTL_SECONDS = 2 * 3600
#: Seconds samples are dropped without asking after Redis failed: a cache that is down costs no batch a timeout.
PAUSE_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class Freshness:
    """A collection's freshness over a window: how many changes, and the seconds at the 50th and 95th
    percentiles (None with no change)."""

    collection: str
    changes: int
    p50: float | None
    p95: float | None


def quantile(ordered: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0 to 1) of sorted values, linearly interpolated; None for none."""
    if not ordered:
        return None
    at = q * (len(ordered) - 1)
    low, high = math.floor(at), math.ceil(at)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


class FreshnessLog:
    """The newest freshness samples of each collection, in the cache's Redis (a list per collection)."""

    def __init__(self, url: str | None, *, network: NetworkSettings | None = None) -> None:
        self.client: Any = None
        if url and url.startswith(REDIS_SCHEMES):
            self.client = redis_client(url, network, timeout=2)
        self._paused_until = 0.0

    @property
    def kept(self) -> bool:
        """Whether samples are kept at all (a Redis cache is configured)."""
        return self.client is not None

    def add(self, collection: str, seconds: Sequence[float], *, at: float | None = None) -> None:
        """Keep ``seconds`` (changes made searchable at ``at``, default now). A Redis that fails loses these
        samples, never the batch: the histogram has them all the same; then none are kept for ``PAUSE_SECONDS``."""
        if self.client is None or not seconds or time.monotonic() < self._paused_until:
            return
        stamp = time.time() if at is None else at
        key = FRESHNESS_KEY_PREFIX + collection
        try:
            with self.client.pipeline(transaction=False) as pipe:
                pipe.lpush(key, *(f"{stamp:.3f} {value:.3f}" for value in seconds))
                pipe.ltrim(key, 0, KEPT - 1)
                pipe.expire(key, TTL_SECONDS)
                pipe.execute()
        except REDIS_ERRORS as exc:
            self._paused_until = time.monotonic() + PAUSE_SECONDS
            log.warning(
                "could not keep %d freshness samples of %s (%s); none kept for %.0f s",
                len(seconds),
                collection,
                exc,
                PAUSE_SECONDS,
            )

    def recent(self, collection: str, *, window: float = 3600.0) -> Freshness:
        """``collection``'s freshness over the last ``window`` seconds. Raises what Redis raises."""
        if self.client is None:
            return Freshness(collection, 0, None, None)
        since = time.time() - window
        values = []
        for sample in self.client.lrange(FRESHNESS_KEY_PREFIX + collection, 0, -1):
            stamp, _, value = (sample.decode() if isinstance(sample, bytes) else sample).partition(" ")
            try:
                if float(stamp) >= since:
                    values.append(float(value))
            except ValueError:
                continue  # not a sample of ours: skipped
        values.sort()
        return Freshness(collection, len(values), quantile(values, 0.5), quantile(values, 0.95))

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
