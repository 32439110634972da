"""A rate limit every process shares: a token bucket per model endpoint, in Redis, taken by a Lua script.

``[models.NAME] requests_per_minute`` and ``tokens_per_minute`` refill two
buckets continuously; each holds at most ``BURST_SECONDS`` of its rate (the
burst a provider that measures over short windows still takes). A call takes
1 request and its estimated tokens, or learns how long to wait, in one atomic
script that reads the clock with Redis ``TIME`` (never a client's). A call of
more tokens than the bucket holds goes when the bucket is full and leaves it
in debt, so big batches wait their turn instead of forever. Callers wait in
steps of at most ``MAX_SLEEP_SECONDS``; the time is in the metric
``vectorsync_rate_limit_wait_seconds{model}``.

A 429 shrinks the budget for everyone: the bucket is emptied and pauses for
the server's Retry-After (``DEFAULT_PAUSE_SECONDS`` when it sent none, at most
the chain's ``max_wait_seconds``), then refills at half the rate for
``SLOW_SECONDS``. The bucket key hashes the provider, endpoint and model
(never a key), so every entry naming the same model at the same endpoint
shares one budget. When Redis cannot be reached there is no shared limit: that
is logged once per process, and Redis is tried again after ``RETRY_SECONDS``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from store.connect.redis import REDIS_ERRORS, redis_client
from store.contract import RATE_LIMIT_KEY_PREFIX, REDIS_SCHEMES
from store.settings import ModelSettings, NetworkSettings
from store.settings.urls import without_credentials

__all__ = [
    "BURST_SECONDS",
    "DEFAULT_PAUSE_SECONDS",
    "MAX_SLEEP_SECONDS",
    "RETRY_SECONDS",
    "SLOW_SECONDS",
    "Budget",
    "Limiter",
    "RateLimiter",
    "bucket_key",
    "rate_limiters",
    "wait_histogram",
]

log = logging.getLogger(__name__)

#: Seconds of its rate a bucket holds when full: the largest burst.
BURST_SECONDS = 10.0
#: The longest single sleep of a waiting call; it then asks again (a 429 or a Redis outage may have
#: changed the answer meanwhile).
MAX_SLEEP_SECONDS = 1.0
#: Seconds a bucket pauses after a 429 that carried no Retry-After.
DEFAULT_PAUSE_SECONDS = 1.0
#: Seconds a bucket refills at half its rate after a 429's pause.
SLOW_SECONDS = 60.0
#: Seconds without a shared limit after Redis failed, before Redis is tried again.
RETRY_SECONDS = 30.0
#: Seconds Redis gets to connect or answer before the limit is skipped.
SOCKET_TIMEOUT = 0.5

# KEYS[1] the bucket. ARGV: mode ("take" or "penalize"), requests and tokens a second (0: no limit),
# burst seconds, the requests and tokens to take, pause and slow seconds (penalize). Returns the
# microseconds to wait, 0 when taken. Fields: r, t (levels), at (last refill), paused, slow (until).
_SCRIPT = """
if redis.replicate_commands then redis.replicate_commands() end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local rates = {tonumber(ARGV[2]), tonumber(ARGV[3])}
local burst = tonumber(ARGV[4])
local costs = {tonumber(ARGV[5]), tonumber(ARGV[6])}
local fields = {'r', 't'}
local state = redis.call('HMGET', KEYS[1], 'r', 't', 'at', 'paused', 'slow')
local at = tonumber(state[3]) or now
local paused = tonumber(state[4]) or 0
local slow = tonumber(state[5]) or 0
local from = math.max(at, paused)
local span = math.max(now - from, 0)
local refill = span - math.max(math.min(now, slow) - from, 0) / 2
local levels = {}
for i = 1, 2 do
  if rates[i] > 0 then
    local cap = rates[i] * burst
    levels[i] = math.min(cap, (tonumber(state[i]) or cap) + rates[i] * refill)
  end
end
local wait = 0
if ARGV[1] == 'penalize' then
  paused = math.max(paused, now + tonumber(ARGV[7]))
  slow = math.max(slow, paused + tonumber(ARGV[8]))
  for i = 1, 2 do
    if levels[i] then levels[i] = math.min(levels[i], 0) end
  end
else
  local pause = math.max(paused - now, 0)
  wait = pause
  for i = 1, 2 do
    if levels[i] then
      local need = math.min(costs[i], rates[i] * burst)
      if levels[i] < need then
        local speed = rates[i]
        if now + pause < slow then speed = speed / 2 end
        wait = math.max(wait, pause + (need - levels[i]) / speed)
      end
    end
  end
  if wait <= 0 then
    for i = 1, 2 do
      if levels[i] then levels[i] = levels[i] - costs[i] end
    end
  end
end
local keep = math.max(paused, slow, now) - now
local function exact(x) return string.format('%.17g', x) end
local values = {'at', exact(now), 'paused', exact(paused), 'slow', exact(slow)}
for i = 1, 2 do
  if levels[i] then
    table.insert(values, fields[i])
    table.insert(values, exact(levels[i]))
    keep = keep + math.max(rates[i] * burst - levels[i], 0) / (rates[i] / 2)
  end
end
redis.call('HSET', KEYS[1], unpack(values))
redis.call('PEXPIRE', KEYS[1], math.ceil((keep + 1) * 1000))
return math.ceil(wait * 1000000)
"""


class Limiter(Protocol):
    """What the failover engine needs of a rate limit."""

    def acquire(self, *, tokens: int = 0) -> float:
        """Wait until one request of ``tokens`` fits the budget; the seconds waited."""
        ...

    def penalize(self, retry_after: float | None) -> None:
        """The provider answered 429: shrink the budget (see the module docstring)."""
        ...


def bucket_key(model: ModelSettings, *, prefix: str = RATE_LIMIT_KEY_PREFIX) -> str:
    """The Redis key of ``model``'s budget: a hash of its provider, endpoint and model name, never a key."""
    endpoint = (model.base_url or "").rstrip("/")
    digest = hashlib.sha256(f"{model.provider}\0{endpoint}\0{model.model}".encode()).hexdigest()[:32]
    return prefix + digest


@dataclass(frozen=True)
class Budget:
    """A model's rate limit: its rates (None: that one unlimited), the seconds of them a full bucket holds, and
    the longest pause a 429 imposes."""

    requests_per_minute: int | None
    tokens_per_minute: int | None
    burst_seconds: float = BURST_SECONDS
    max_pause: float = float("inf")


class RateLimiter:
    """One model's shared budget; see the module docstring. Thread-safe."""

    def __init__(
        self,
        client: Any,
        *,
        name: str,
        key: str,
        budget: Budget,
        retry_seconds: float = RETRY_SECONDS,
        where: str = "Redis",
    ) -> None:
        self.client = client
        #: The ``[models.NAME]`` entry, for metrics and messages.
        self.name = name
        self.key = key
        self.budget = budget
        self.retry_seconds = retry_seconds
        #: Where the budget lives, without credentials: for the one warning when it cannot be reached.
        self.where = where
        self._script = client.register_script(_SCRIPT)
        self._down_until = 0.0

    @classmethod
    def from_url(cls, url: str, *, network: NetworkSettings | None = None, **options: Any) -> RateLimiter:
        """A limiter whose budget is in the Redis at ``url``; connects on first use, with short timeouts (and
        keepalive as ``network`` says)."""
        return cls(redis_client(url, network, timeout=SOCKET_TIMEOUT), where=without_credentials(url), **options)

    def __repr__(self) -> str:
        rates = f"{self.budget.requests_per_minute} requests/min {self.budget.tokens_per_minute} tokens/min"
        return f"<RateLimiter {self.name!r} {rates}>"

    def take(self, *, tokens: int = 0) -> float:
        """Take one request of ``tokens`` now and return 0, or return the seconds until it would fit.

        Without Redis (unreachable, or failed less than ``retry_seconds`` ago) every call fits: 0.
        """
        micros = self._run("take", 1, max(tokens, 0), 0.0, 0.0)
        return micros / 1_000_000

    def acquire(self, *, tokens: int = 0) -> float:
        """Wait until one request of ``tokens`` fits, sleeping at most ``MAX_SLEEP_SECONDS`` at a time."""
        waited = 0.0
        while (wait := self.take(tokens=tokens)) > 0:
            step = min(wait, MAX_SLEEP_SECONDS) * random.uniform(1.0, 1.05)  # waiters woken together spread out
            time.sleep(step)
            waited += step
        wait_histogram().labels(self.name).observe(waited)  # 0 too: the share of calls that waited shows
        return waited

    def penalize(self, retry_after: float | None) -> None:
        """Empty the bucket, pause it for ``retry_after`` (at most the budget's ``max_pause``), then refill at half
        rate."""
        pause = min(retry_after if retry_after is not None else DEFAULT_PAUSE_SECONDS, self.budget.max_pause)
        self._run("penalize", 0, 0, max(pause, 0.0), SLOW_SECONDS)

    def _run(self, mode: str, requests: int, tokens: int, pause: float, slow: float) -> int:
        if time.monotonic() < self._down_until:
            return 0
        budget = self.budget
        per_second = [(limit or 0) / 60 for limit in (budget.requests_per_minute, budget.tokens_per_minute)]
        try:
            return int(
                self._script(
                    keys=[self.key], args=[mode, *per_second, budget.burst_seconds, requests, tokens, pause, slow]
                )
            )
        except REDIS_ERRORS as exc:
            self._down_until = time.monotonic() + self.retry_seconds
            _warn_once(
                f"the shared rate limit is off: Redis at {self.where} failed ({type(exc).__name__}); "
                f"model calls go without it and Redis is tried again every {self.retry_seconds:g}s"
            )
            return 0


def rate_limiters(
    url: str,
    entries: Sequence[tuple[str, ModelSettings]],
    *,
    max_pause: float = float("inf"),
    network: NetworkSettings | None = None,
) -> Mapping[str, Limiter]:
    """A limiter for each entry that sets ``requests_per_minute`` or ``tokens_per_minute``, by entry name.

    ``url`` is the Redis of ``[cache] url``; one that is not a Redis leaves every entry unlimited (said once).
    ``network``: keepalive and health checks of its connections (None: the defaults).
    """
    limited = [
        (name, model)
        for name, model in entries
        if model.requests_per_minute is not None or model.tokens_per_minute is not None
    ]
    if not limited:
        return {}
    if not url.startswith(REDIS_SCHEMES):
        _warn_once(
            f"the shared rate limit is off: cache.url ({url.split('://')[0]}://...) is not a Redis; "
            "set [cache] url to one"
        )
        return {}
    client = redis_client(url, network, timeout=SOCKET_TIMEOUT)  # one connection pool for the chain's limiters
    return {
        name: RateLimiter(
            client,
            name=name,
            key=bucket_key(model),
            budget=Budget(model.requests_per_minute, model.tokens_per_minute, max_pause=max_pause),
            where=without_credentials(url),
        )
        for name, model in limited
    }


_warned_in: int | None = None
_lock = threading.Lock()
_histogram: Any = None


def _warn_once(message: str) -> None:
    """Log ``message`` at WARNING unless this process has already warned about the shared limit."""
    global _warned_in
    with _lock:
        if _warned_in == os.getpid():
            return
        _warned_in = os.getpid()
    log.warning(message)


def wait_histogram() -> Any:
    """``vectorsync_rate_limit_wait_seconds``, made once in this process."""
    # Made once, under a lock, as store.calls.accounting's counters: calls wait in parallel threads.
    global _histogram
    with _lock:
        if _histogram is None:
            from prometheus_client import Histogram

            _histogram = Histogram(
                "vectorsync_rate_limit_wait_seconds",
                "Seconds model calls waited for the shared rate limit",
                ["model"],
                buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
            )
        return _histogram
