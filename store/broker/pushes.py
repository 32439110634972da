"""A copy of each pushed document until a worker has indexed it, so that a lost message is sent again.

A pushed document's content lives only in its task message. Redis hands a message to a worker in two steps
(kombu's ``BRPOP``, then its record of the message as unacknowledged): a worker's main process killed between
them loses it, as a broker without persistence does when it restarts, and no source holds the document for a
sweep to heal it from (30-minute chaos runs lost one or two documents). So the producer keeps each push in the
cache's Redis before it sends it: per collection, the document's id to its newest push (text, metadata,
version, when sent). The task drops the entry once the push is indexed, deleted, superseded or given up, unless
a newer push replaced it meanwhile (compare-and-delete by version). The collection's sweep (``reconcile``,
which Celery beat sends for pushed collections too) sends again every entry sent more than
``broker.visibility_timeout`` ago: by then a message a dead worker held has come back by itself, so one still
kept was lost (or waits behind a backlog that long, and is indexed twice, which changes nothing).

Without a Redis cache (a RabbitMQ broker and no ``[cache] url``) nothing is kept, as before.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from store.connect.redis import REDIS_ERRORS, redis_client, replicated
from store.connect.redis_urls import redis_form
from store.contract import PUSHED_KEY_PREFIX, REDIS_SCHEMES
from store.settings import NetworkSettings

__all__ = ["Push", "Pushes"]

log = logging.getLogger(__name__)

#: Digits of a version as kept: versions are below 2**63, and Lua compares equal-length digit strings exactly
#: (its numbers are doubles, which round nanosecond versions).
_DIGITS = 19
#: A version above every push's: ``drop`` settles whatever is kept.
_NEWEST = 10**_DIGITS - 1

# KEYS: the collection's pushes, its versions; ARGV: id, push (JSON), version (_DIGITS digits).
_KEEP = """
local held = redis.call('HGET', KEYS[2], ARGV[1])
if held and held > ARGV[3] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return 1
"""
# KEYS as _KEEP's; ARGV: id, version.
_SETTLE = """
local held = redis.call('HGET', KEYS[2], ARGV[1])
if not held or held > ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
"""


@dataclass(frozen=True, slots=True)
class Push:
    """One kept push: ``text`` None deletes the document."""

    id: str
    text: str | None
    metadata: dict[str, Any]
    version: int
    sent_at: float


class Pushes:
    """The pushes of each collection not yet indexed, in the cache's Redis (module docstring)."""

    def __init__(self, url: str | None, *, network: NetworkSettings | None = None) -> None:
        self.client: Any = None
        #: A Sentinel's master: a push is kept once a replica has it too (``replicated``).
        self.sentinel = redis_form(url or "") == "sentinel"
        if url and url.startswith(REDIS_SCHEMES):
            self.client = redis_client(url, network, timeout=2)
            self._keep = self.client.register_script(_KEEP)
            self._settle = self.client.register_script(_SETTLE)

    def keep(self, collection: str, push: Push) -> None:
        """Keep ``push`` unless a newer push of its document is kept. Raises what Redis raises: the caller
        has not sent the push yet, and says it could not."""
        if self.client is None:
            return
        # ASCII JSON: a lone surrogate in a text (decoded with surrogateescape) is written escaped, as Celery's
        # JSON writes the message, where redis-py's strict UTF-8 would raise.
        body = json.dumps(
            {"text": push.text, "metadata": push.metadata, "version": push.version, "sent_at": push.sent_at}
        )
        if not self.sentinel:
            self._keep(keys=_keys(collection), args=[push.id, body, _digits(push.version)])
            return
        with self.client.pipeline(transaction=False) as pipe:
            self._keep(keys=_keys(collection), args=[push.id, body, _digits(push.version)], client=pipe)
            replicated(self.client, pipe)

    def settle(self, collection: str, id: str, version: int) -> None:
        """The push of ``id`` at ``version`` is indexed (or given up): drop it, unless a newer one is kept. A
        Redis that fails leaves it kept: the sweep sends it again, and a worker finds it indexed already."""
        if self.client is None:
            return
        try:
            self._settle(keys=_keys(collection), args=[id, _digits(version)])
        except REDIS_ERRORS as exc:
            log.warning("could not drop the kept push of %s/%s: %s", collection, id, exc)

    def drop(self, collection: str, id: str) -> bool:
        """Drop the kept push of ``id``, whatever its version (``vectorsync forget``); whether one was kept.
        Raises what Redis raises: an erasure must not pass for done."""
        if self.client is None:
            return False
        return bool(self._settle(keys=_keys(collection), args=[id, _digits(_NEWEST)]))

    def lost(self, collection: str, *, older_than: float) -> Iterator[Push]:
        """The pushes of ``collection`` sent more than ``older_than`` seconds ago and still kept."""
        if self.client is None:
            return
        before = time.time() - older_than
        for id, body in self.client.hscan_iter(_keys(collection)[0], count=500):
            push = _push(id, body)
            if push is not None and push.sent_at < before:
                yield push

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def _keys(collection: str) -> list[str]:
    return [f"{PUSHED_KEY_PREFIX}{collection}", f"{PUSHED_KEY_PREFIX}{collection}:versions"]


def _digits(version: int) -> str:
    return f"{version:0{_DIGITS}d}"


def _push(id: bytes | str, body: bytes | str) -> Push | None:
    """A kept push as read back; None for an entry that is not one (logged)."""
    key = id.decode() if isinstance(id, bytes) else id
    try:
        data: Mapping[str, Any] = json.loads(body)
        return Push(key, data["text"], dict(data["metadata"] or {}), int(data["version"]), float(data["sent_at"]))
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("a kept push of %r cannot be read, skipped: %s", key, exc)
        return None
