"""What each capped run used, its calls in flight included, shared by every worker process, in the cache's Redis.

A batch's budget (``store.calls.caps.Budget``) asks here before it buys anything, for all its provider calls at
once (``store.calls.caps.prepaid``), and again only for a call that needs more than that. One Lua script reads
the run's total, refuses the calls when the total and the calls would pass a cap, and else adds them, so two
processes can never both take the last tokens left. When the call is over, its reservation is settled to what
the provider counted (``settle``). The total is the run's whole use, not only what is in flight: a call that is
over stays counted until its batch writes its spend to the ledger and after, so no moment lets a call pass
unseen. The key starts from the ledger's spend of the run (``seed``, read as the batch started) when it is
missing: at a run's first call, or after it expired (``ttl_seconds`` after the run's last call: by then every
batch that called has written its spend).

Redis down or silent: the call is refused with StoreUnavailable, so the batch is retried later, as in any
outage; a budget is never passed for want of its count.
"""

from __future__ import annotations

import logging
from typing import Any

from store.calls.spend import Spent
from store.connect.redis import REDIS_ERRORS, redis_client, unavailable
from store.contract import REDIS_SCHEMES, RESERVED_KEY_PREFIX
from store.settings import NetworkSettings

__all__ = ["DEFAULT_TTL_SECONDS", "Reservations"]

log = logging.getLogger(__name__)

#: Seconds a run's total is kept after its last call: a paused run resumed later starts again from the ledger.
DEFAULT_TTL_SECONDS = 86_400

# KEYS[1] the run's key; ARGV: seed tokens, seed cost, call tokens, call cost (-1: no price), max tokens,
# max cost (-1: none), ttl. Returns {cap, used}: cap "" when the call was added (used then counts it).
_RESERVE = """
local key = KEYS[1]
if redis.call('EXISTS', key) == 0 then
  redis.call('HSET', key, 'tokens', ARGV[1], 'cost', ARGV[2])
end
redis.call('EXPIRE', key, ARGV[7])
local tokens = tonumber(redis.call('HGET', key, 'tokens'))
local cost = tonumber(redis.call('HGET', key, 'cost'))
local call_tokens, call_cost = tonumber(ARGV[3]), tonumber(ARGV[4])
local max_tokens, max_cost = tonumber(ARGV[5]), tonumber(ARGV[6])
if max_tokens >= 0 and tokens + call_tokens > max_tokens then
  return {'max_tokens', tostring(tokens)}
end
if max_cost >= 0 and call_cost >= 0 and cost + call_cost > max_cost then
  return {'max_cost', tostring(cost)}
end
redis.call('HINCRBY', key, 'tokens', ARGV[3])
if call_cost > 0 then
  redis.call('HINCRBYFLOAT', key, 'cost', ARGV[4])
end
return {'', tostring(tokens + call_tokens)}
"""

# KEYS[1] the run's key; ARGV: tokens and cost to add (negative: the call used less than it reserved).
_SETTLE = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'tokens', ARGV[1])
  redis.call('HINCRBYFLOAT', KEYS[1], 'cost', ARGV[2])
end
return 0
"""


def _number(value: float | None) -> str:
    return "-1" if value is None else f"{value:.12f}"


class Reservations:
    """Runs' totals (tokens and cost used, calls in flight included), in keys that expire ``ttl_seconds``
    after a run's last call."""

    def __init__(self, client: Any, *, ttl_seconds: int = DEFAULT_TTL_SECONDS) -> None:
        self.client, self.ttl = client, ttl_seconds
        self._reserve = client.register_script(_RESERVE)
        self._settle = client.register_script(_SETTLE)

    @classmethod
    def from_url(cls, url: str, *, network: NetworkSettings | None = None) -> Reservations | None:
        """Over the Redis at ``url``; None when it is not a Redis (each process then keeps its own count)."""
        if not url.startswith(REDIS_SCHEMES):
            return None
        return cls(redis_client(url, network, timeout=5))

    def reserve(
        self, run_id: str, *, seed: Spent, call: tuple[int, float | None], caps: tuple[int | None, float | None]
    ) -> tuple[str, float] | None:
        """Add ``call`` (tokens, cost) to ``run_id``'s total, started from ``seed`` when missing; the cap it
        would pass and the total without it instead, adding nothing. Raises StoreUnavailable when Redis does
        not answer: the call must wait, not pass the cap unseen."""
        tokens, cost = call
        args = [seed.tokens, _number(seed.cost or 0.0), tokens, _number(cost), _number(caps[0]), _number(caps[1])]
        with unavailable(f"the budget of run {run_id} in Redis", "its capped batches wait for it ([cache] url)"):
            cap, used = self._reserve(keys=[self._key(run_id)], args=[*args, self.ttl])
        return None if not cap else (_text(cap), float(used))

    def settle(self, run_id: str, *, tokens: int, cost: float) -> None:
        """Correct ``run_id``'s total by what a call used beyond what it reserved (negative: less, or nothing
        when it failed). A Redis that does not answer keeps the reservation as it was: it errs toward the cap."""
        if not tokens and not cost:
            return
        try:
            self._settle(keys=[self._key(run_id)], args=[tokens, _number(cost)])
        except REDIS_ERRORS as exc:
            log.warning("could not settle a call of run %s in Redis (%s): it counts as reserved", run_id, exc)

    def used(self, run_id: str) -> Spent | None:
        """``run_id``'s total as Redis holds it; None when there is none."""
        found = self.client.hgetall(self._key(run_id))
        if not found:
            return None
        return Spent(tokens=int(found[b"tokens"]), cost=float(found[b"cost"]))

    def close(self) -> None:
        self.client.close()

    @staticmethod
    def _key(run_id: str) -> str:
        return f"{RESERVED_KEY_PREFIX}{run_id}"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
