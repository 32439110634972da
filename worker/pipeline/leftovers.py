"""A run's leftover pool: records whose chunks would have made a partly filled provider call, kept in Redis
until other batches of the run (or its last, the pool batch) embed them in full calls.

Each ``index_batch`` of a pooled run embeds only whole provider calls. The records whose chunks are left over
(the last call's) are put in the pool with how many texts they still need; a later batch whose own last call
is partly filled takes records from the pool (``claim``) until that call is full. So every call is full but
the pool batch's, the run's last (``POOL_BATCH`` in ``store.contract``): the fan-out counts it in the run's
batches, and it is sent when every other batch is counted; it takes everything still in the pool or in any
claim (``take_over``), embeds it, and counts last.

Counting never depends on the pool: a record is counted by the batch whose ids hold it, and one it leaves in
the pool counts as done there, because the run cannot end before the pool batch has emptied the pool. A batch
that claims records writes them and never counts them; what it could not index (failed, or to retry) goes back
to the pool for the pool batch alone (``settle``), and the pool batch's count moves the records that failed
from done to failed. So any attempt of a batch (a retry, a redelivery, a second fan-out's copy) counts the
same records, and the one counted first stands.

Nothing is lost when a worker or the pool's Redis (often the broker's own) goes away:

- a record in the pool or in a claim is the pool batch's to write if no claimer does, and the pool batch
  writes again whatever a claim still holds, since writing a record twice is harmless (it re-checks the
  source under the record's lock, and its texts are cache hits);
- a batch that cannot claim indexes its own ids alone; one that cannot defer embeds its leftovers at once;
  one that cannot settle leaves its claim for the pool batch; none of them needs a retry (nor the broker);
- a batch that left records in Redis after its run ended sends the pool batch again;
- every key expires (``ttl_seconds`` after its last write), so a run whose tasks were lost leaves nothing.

Every write re-checks the source under the records' locks as always, so a pooled record is written as the
source holds it when its write happens. A live ``index_record`` never touches the pool.

Keys (prefix ``POOL_KEY_PREFIX``): ``<run>`` (record id -> texts still to embed; 0 for a record only the pool
batch takes), ``<run>:claims`` (the owners with a claim), ``<run>:claim:<owner>`` (an owner's claimed records).

Here: the pool's keys, and the Lua scripts that move records between the pool and the claims of the batches that
fill their last provider call from it (``LeftoverPool``); ``RunPool`` is one batch's view of it, the ``Leftovers``
(``worker.pipeline.batch``) its Indexer fills that call from.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from store.connect.redis import redis_client, unavailable
from store.contract import POOL_KEY_PREFIX, REDIS_SCHEMES
from store.settings import NetworkSettings

__all__ = ["DEFAULT_TTL_SECONDS", "LeftoverPool", "RunPool"]

log = logging.getLogger(__name__)

#: How long a run's pool keys live after their last write: far longer than any run's batches take.
DEFAULT_TTL_SECONDS = 3 * 86_400

#: Moves records from the pool to an owner's claim until their texts reach ARGV[1] (0: all of them, those kept
#: for the pool batch too); nothing when the pool holds fewer texts than that. Returns the owner's whole claim,
#: what an earlier attempt of the same batch claimed included.
_CLAIM = """
local wanted = tonumber(ARGV[1])
local pending = redis.call('HGETALL', KEYS[1])
local total = 0
for i = 2, #pending, 2 do total = total + math.max(0, tonumber(pending[i])) end
if wanted == 0 or total >= wanted then
  local sum = 0
  for i = 1, #pending, 2 do
    if wanted > 0 and sum >= wanted then break end
    local texts = tonumber(pending[i + 1])
    if wanted == 0 or texts > 0 then
      redis.call('HSET', KEYS[3], pending[i], pending[i + 1])
      redis.call('HDEL', KEYS[1], pending[i])
      sum = sum + texts
    end
  end
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('SADD', KEYS[2], ARGV[2])
  for i = 1, 3 do redis.call('EXPIRE', KEYS[i], ARGV[3]) end
end
return redis.call('HGETALL', KEYS[3])
"""
#: ARGV[1] (the owner) is done with the ARGV[3] records from ARGV[4] on: out of its claim. The records after
#: them go from its claim back to the pool at 0 texts, for the pool batch alone. The claim closes once it is
#: empty (a record an attempt claimed without hearing so stays, for the pool batch). Returns what it still holds.
_SETTLE = """
local done = tonumber(ARGV[3])
for i = 4, 3 + done do redis.call('HDEL', KEYS[3], ARGV[i]) end
if #ARGV > 3 + done then
  for i = 4 + done, #ARGV do
    redis.call('HDEL', KEYS[3], ARGV[i])
    redis.call('HSET', KEYS[1], ARGV[i], 0)
  end
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end
if redis.call('EXISTS', KEYS[3]) == 0 then redis.call('SREM', KEYS[2], ARGV[1]) end
return redis.call('HLEN', KEYS[3])
"""
#: Gives an owner's claim back to the pool.
_RELEASE = """
local claimed = redis.call('HGETALL', KEYS[3])
for i = 1, #claimed, 2 do redis.call('HSET', KEYS[1], claimed[i], claimed[i + 1]) end
if #claimed > 0 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
redis.call('DEL', KEYS[3])
redis.call('SREM', KEYS[2], ARGV[1])
return #claimed / 2
"""
#: Moves every other owner's claim and the whole pool into ARGV[1]'s claim (the pool batch's); returns it.
_TAKE_OVER = """
local owners = redis.call('SMEMBERS', KEYS[2])
for _, other in ipairs(owners) do
  if other ~= ARGV[1] then
    local key = KEYS[1] .. ':claim:' .. other
    local claimed = redis.call('HGETALL', key)
    for i = 1, #claimed, 2 do redis.call('HSET', KEYS[3], claimed[i], claimed[i + 1]) end
    redis.call('DEL', key)
    redis.call('SREM', KEYS[2], other)
  end
end
local pending = redis.call('HGETALL', KEYS[1])
for i = 1, #pending, 2 do redis.call('HSET', KEYS[3], pending[i], pending[i + 1]) end
redis.call('DEL', KEYS[1])
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('SADD', KEYS[2], ARGV[1])
  redis.call('EXPIRE', KEYS[2], ARGV[2])
  redis.call('EXPIRE', KEYS[3], ARGV[2])
end
return redis.call('HGETALL', KEYS[3])
"""


class LeftoverPool:
    """The leftover pools of every run, in the Redis at ``[cache] url``; see the module docstring."""

    def __init__(self, client: redis.Redis, *, ttl_seconds: int = DEFAULT_TTL_SECONDS) -> None:
        self.client = client
        self.ttl = ttl_seconds
        self._claim = client.register_script(_CLAIM)
        self._settle = client.register_script(_SETTLE)
        self._release = client.register_script(_RELEASE)
        self._take_over = client.register_script(_TAKE_OVER)

    @classmethod
    def from_url(cls, url: str | None, *, network: NetworkSettings | None = None) -> LeftoverPool | None:
        """The pool at a Redis ``url``; None for no URL or one that is not Redis (batches then embed alone)."""
        if not url or not url.startswith(REDIS_SCHEMES):
            return None
        return cls(redis_client(url, network, timeout=5, connect_timeout=2))

    def run(self, run_id: str, owner: str) -> RunPool:
        """The pool of ``run_id`` as the batch ``owner`` uses it."""
        return RunPool(self, run_id, owner)

    def keys(self, run_id: str, owner: str) -> list[str]:
        base = f"{POOL_KEY_PREFIX}{run_id}"
        return [base, f"{base}:claims", f"{base}:claim:{owner}"]

    def claim(self, run_id: str, owner: str, *, texts: int) -> dict[str, int]:
        """Records of the pool whose texts reach ``texts`` (0: every record), now ``owner``'s, with what an
        earlier attempt of ``owner`` claimed; nothing new when the pool holds fewer texts. Records given back
        for the pool batch (0 texts) come only with ``texts=0``. Raises StoreUnavailable."""
        found = self._call(self._claim, self.keys(run_id, owner), [texts, owner, self.ttl])
        return {_text(found[i]): int(found[i + 1]) for i in range(0, len(found), 2)}

    def take_over(self, run_id: str, owner: str) -> dict[str, int]:
        """Every record of the pool and of every claim, now ``owner``'s: the pool batch writes them all, those
        a claimer may be writing too (twice is harmless). Raises StoreUnavailable."""
        found = self._call(self._take_over, self.keys(run_id, owner), [owner, self.ttl])
        return {_text(found[i]): int(found[i + 1]) for i in range(0, len(found), 2)}

    def defer(self, run_id: str, pending: Mapping[str, int]) -> None:
        """Put records in the pool with how many texts each still needs. Raises StoreUnavailable."""
        if pending:
            key = self.keys(run_id, "")[0]
            pipe = self.client.pipeline()
            pipe.hset(key, mapping={k: int(v) for k, v in pending.items()})
            pipe.expire(key, self.ttl)
            self._call(pipe.execute)

    def settle(self, run_id: str, owner: str, done: Sequence[str], back: Sequence[str] = ()) -> int:
        """``owner`` is done with ``done`` (written, or given up), and gives ``back`` to the pool for the pool
        batch alone (records it claimed and could not index); how many records its claim still holds. Raises
        StoreUnavailable."""
        owned = list(dict.fromkeys(done))
        return int(self._call(self._settle, self.keys(run_id, owner), [owner, self.ttl, len(owned), *owned, *back]))

    def release(self, run_id: str, owner: str) -> int:
        """Give ``owner``'s claim back to the pool (an attempt that failed); how many records. Raises
        StoreUnavailable."""
        return int(self._call(self._release, self.keys(run_id, owner), [owner, self.ttl]))

    def others(self, run_id: str, owner: str) -> bool:
        """Whether the pool holds records, or owners other than ``owner`` hold claims. Raises StoreUnavailable."""
        pool, claims, _ = self.keys(run_id, owner)
        pipe = self.client.pipeline()
        pipe.hlen(pool)
        pipe.smembers(claims)
        size, owners = self._call(pipe.execute)
        return bool(size) or bool({_text(o) for o in owners} - {owner})

    def close(self) -> None:
        self.client.close()

    def _call(self, function: Any, *args: Any) -> Any:
        with unavailable("the leftover pool's Redis failed"):
            return function(*args)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True, slots=True)
class RunPool:
    """One batch's view of its run's pool: what ``Indexer.index`` takes as ``leftovers``."""

    pool: LeftoverPool
    run_id: str
    owner: str

    def claim(self, texts: int) -> dict[str, int]:
        """Records whose texts fill ``texts`` more of the batch's last call (with the batch's earlier claim);
        {} when the pool has too few. Raises StoreUnavailable."""
        return self.pool.claim(self.run_id, self.owner, texts=texts)

    def defer(self, pending: Mapping[str, int]) -> None:
        """Leave these records, with the texts each still needs, to a later batch. Raises StoreUnavailable."""
        self.pool.defer(self.run_id, pending)
