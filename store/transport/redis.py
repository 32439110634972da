"""kombu's Redis transport, taking a message off its queue and recording it as unacknowledged in one step.

kombu takes a message with ``BRPOP`` and records it as unacknowledged (``QoS.append``) in a second round
trip. A broker that goes away between the two (killed, restarted, cut off) has already removed the message,
durably with AOF, and never records it. So does a ``BRPOP`` reply lost on the wire: a Redis killed with
``appendfsync always`` writes the pop to its AOF before it sends the reply. Either way the task is in
neither place, nothing delivers it again, and a run waiting for that batch stays ``running``.

Here a consumer takes with one Lua script (``TAKE``): it pops the first message of the channel's queues, in
kombu's order, and records it under kombu's own keys (``unacked``, ``unacked_index``) in the same atomic
step. A reply that never arrives leaves the message recorded, and it comes back after the visibility
timeout, as the task of a worker that died does. A script cannot block, so an idle consumer waits with
``BRPOP`` on the queues' bells instead: lists of at most one element, kept ``BELL_MS``, that every publish
(and a take that leaves messages behind) rings. A bell carries nothing, so losing one costs at most
``brpop_timeout`` (1 s): the consumer takes again after every wait, rung or not. See docs/operations.md
("Redis persistence").

Every form of Redis broker URL takes this way (``store.connect.redis_urls``): TCP and TLS through
``Transport``, a Unix socket through ``SocketTransport``, a Sentinel's master through ``SentinelTransport``.
The kombu names all of them rely on are checked as this module is imported (``store.transport.kombu_names``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import redis.exceptions as redis_errors
from kombu.transport import redis
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads

from store.connect.redis import replicated
from store.transport.kombu_names import check

__all__ = [
    "BELL_MS",
    "TAKE",
    "Channel",
    "QoS",
    "SentinelChannel",
    "SentinelTransport",
    "SocketTransport",
    "Transport",
    "bell_key",
]

log = logging.getLogger(__name__)

check(redis)

#: KEYS: the queue keys to take from, in order; then each one's bell; then kombu's ``unacked`` hash and its
#: ``unacked_index``. ARGV: the time recorded (kombu's score, seconds); BELL_MS; then "1" for each queue key
#: whose messages are acknowledged (recorded), "0" for a no-ack consumer's. Returns {key, message} or nil.
#: The message is read, recorded and the bells rung before it is popped: a Redis out of memory
#: (``noeviction``) refuses those writes, and the script then fails having taken nothing.
TAKE = """
local n = (#KEYS - 2) / 2
for i = 1, n do
  local item = redis.call('LINDEX', KEYS[i], -1)
  if item then
    if ARGV[i + 2] == '1' then
      local ok, message = pcall(cjson.decode, item)
      local properties = ok and type(message) == 'table' and message['properties']
      local info = properties and properties['delivery_info']
      local tag = properties and properties['delivery_tag']
      if type(tag) == 'string' and type(info) == 'table' then
        redis.call('ZADD', KEYS[2 * n + 2], ARGV[1], tag)
        redis.call('HSET', KEYS[2 * n + 1], tag,
          '[' .. item .. ',' .. cjson.encode(info['exchange']) .. ',' .. cjson.encode(info['routing_key']) .. ']')
      end
    end
    for j = 1, n do
      if redis.call('LLEN', KEYS[j]) > (j == i and 1 or 0) then
        redis.call('LPUSH', KEYS[n + j], 1)
        redis.call('LTRIM', KEYS[n + j], 0, 0)
        redis.call('PEXPIRE', KEYS[n + j], ARGV[2])
      end
    end
    redis.call('RPOP', KEYS[i])
    return {KEYS[i], item}
  end
end
return false
"""


#: How long a ring is kept. Nothing is lost when it lapses (a waiting consumer takes again after every
#: ``brpop_timeout``), and the bells of short-lived queues (a client's reply queue) go with them.
BELL_MS = 10_000


def bell_key(queue_key: str) -> str:
    """The list a publish to ``queue_key`` rings, that idle consumers of it wait on."""
    return f"_vectorsync.bell.{queue_key}"


class QoS(redis.QoS):
    """kombu's QoS, not recording again a message ``TAKE`` recorded, and taking a late ack or reject of a
    closed channel's message as the connection error it is."""

    def append(self, message: Any, delivery_tag: str) -> None:
        if self.channel.taken == delivery_tag:  # recorded by TAKE: only this process's own record is left
            self.channel.taken = None
            super(redis.QoS, self).append(message, delivery_tag)
            return
        super().append(message, delivery_tag)

    def ack(self, delivery_tag: str) -> None:
        self._open()
        super().ack(delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        self._open()
        super().reject(delivery_tag, requeue=requeue)

    def restore_unacked(self, client: Any = None) -> Any:
        self._open()
        return super().restore_unacked(client)

    def _open(self) -> None:
        """A task that ends after its channel's connection was closed (the broker went away meanwhile) is acked
        on that channel. kombu then fails with an AttributeError (its transport no longer has a client), which
        is no connection error: Celery does not swallow it, it escapes the worker's event loop, and the worker
        stops consuming for good. As a connection error it is logged, and the message, still unacknowledged in
        Redis, comes back after the visibility timeout."""
        transport = getattr(self.channel, "connection", None)
        if transport is None or transport.client is None:
            raise redis_errors.ConnectionError("the channel of this message was closed")


# The mixin is checked as the kombu channel it is mixed into; at run time it stands on its own.
if TYPE_CHECKING:
    _Channel = redis.Channel
else:
    _Channel = object


class Taking(_Channel):
    """What a kombu Redis channel is given to consume with ``TAKE`` and bells (module docstring) instead of
    ``BRPOP``: mixed into kombu's plain channel and its Sentinel channel alike."""

    QoS = QoS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.global_keyprefix:
            raise ValueError(
                "store.transport.redis does not take global_keyprefix: use a Redis database of its own instead"
            )
        #: The delivery tag of the message being delivered, which ``TAKE`` recorded already.
        self.taken: str | None = None
        #: Queues consumed without acknowledgement (a client's reply queue): ``TAKE`` records none of theirs.
        self._no_ack: set[str | None] = set()
        #: Whether the next wait is for a bell (the last take found nothing), else a take.
        self._idle = False
        self._sent: str | None = None

    def basic_consume(self, queue: str, no_ack: bool, *args: Any, **kwargs: Any) -> Any:
        (self._no_ack.add if no_ack else self._no_ack.discard)(queue)  # kombu keeps one consumer per queue
        return super().basic_consume(queue, no_ack, *args, **kwargs)

    def _basic_cancel(self, consumer_tag: str) -> Any:
        queue = self._tag_to_queue.get(consumer_tag)
        result = super()._basic_cancel(consumer_tag)
        if queue not in self._active_queues:
            self._no_ack.discard(queue)
        return result

    def _brpop_start(self, timeout: int | None = None) -> None:
        queues = self._queue_cycle.consume(len(self.active_queues))
        if not queues:
            return
        keys = [self._q_for_pri(queue, pri) for pri in self.priority_steps for queue in queues]
        self._in_poll = self.client.connection
        self._brpop_sent_at = time.monotonic()  # type: ignore[assignment]  # kombu's own, typed as its default
        connection = self.client.connection
        if self._idle:
            self._sent = "BRPOP"
            connection.send_command("BRPOP", *map(bell_key, keys), self.brpop_timeout if timeout is None else timeout)
            return
        acked = ["0" if key.rsplit(self.sep, 1)[0] in self._no_ack else "1" for key in keys]
        self._sent = "EVAL"
        connection.send_command(
            "EVAL",
            TAKE,
            2 * len(keys) + 2,
            *keys,
            *map(bell_key, keys),
            self.unacked_key,
            self.unacked_index_key,
            repr(time.time()),
            BELL_MS,
            *acked,
        )

    def _brpop_read(self, **options: Any) -> bool:
        sent, self._sent = self._sent, None
        try:
            try:
                reply = self.client.parse_response(self.client.connection, sent or "EVAL", **options)
            except self.connection_errors:
                self.client.connection.disconnect()  # the next poll connects again
                raise
            except self.ResponseError as exc:  # out of memory, say: nothing was taken; wait, then take again
                log.warning("the broker refused to hand over a message (%s); trying again in a moment", exc)
                self._idle = True
                raise redis.Empty() from exc
            if sent == "BRPOP" or not reply:
                self._idle = sent != "BRPOP"  # found nothing: wait for a bell; rung or timed out: take
                raise redis.Empty()
            self._idle = False
            key, item = reply
            queue = bytes_to_str(key).rsplit(self.sep, 1)[0]
            self._queue_cycle.rotate(queue)
            payload = loads(bytes_to_str(item))
            properties = payload.get("properties") or {}
            if queue not in self._no_ack and isinstance(properties.get("delivery_info"), dict):
                self.taken = properties.get("delivery_tag")  # what TAKE recorded, as it decided
            try:
                self.connection._deliver(payload, queue)
            finally:
                self.taken = None
            return True
        finally:
            self._in_poll = False
            self._flush_brpop_reauth()

    def _put(self, queue: str, message: dict[str, Any], **kwargs: Any) -> None:
        """kombu's publish, ringing the queue's bell in the same round trip."""
        batch = kwargs.pop("_publish_batch", None)
        if batch is not None:
            super()._put(queue, message, _publish_batch=_Ringing(batch.add), **kwargs)
            return
        with self.conn_or_acquire() as client, client.pipeline(transaction=False) as pipe:
            super()._put(queue, message, _publish_batch=_Ringing(_calling(pipe)), **kwargs)
            self._published(client, pipe)

    def _published(self, client: Any, pipe: Any) -> None:
        """Send a publish's commands (a Sentinel's channel also waits for a replica to have them)."""
        pipe.execute()

    def _do_restore_message(
        self, payload: dict[str, Any], exchange: str, routing_key: str, pipe: Any, leftmost: bool = False
    ) -> None:
        """kombu's restore, ringing the bells of the queues it goes back to."""
        super()._do_restore_message(payload, exchange, routing_key, _Ringing(_calling(pipe)), leftmost)


class _Ringing:
    """Where kombu's publish or restore puts its commands (``add``, as a publish batch takes them; ``lpush`` and
    ``rpush``, as a pipeline does): each goes on to ``add``, and a push to a queue key rings that key's bell."""

    def __init__(self, add: Callable[..., Any]) -> None:
        self._add = add

    def add(self, name: str, *args: Any) -> None:
        self._add(name, *args)
        if name in ("lpush", "rpush"):
            bell = bell_key(args[0])
            self._add("lpush", bell, 1)
            self._add("ltrim", bell, 0, 0)
            self._add("pexpire", bell, BELL_MS)

    def lpush(self, key: str, *values: Any) -> _Ringing:
        self.add("lpush", key, *values)
        return self

    def rpush(self, key: str, *values: Any) -> _Ringing:
        self.add("rpush", key, *values)
        return self


def _calling(pipe: Any) -> Callable[..., Any]:
    """``add`` for a redis-py pipeline: a command by its method's name."""
    return lambda name, *args: getattr(pipe, name)(*args)


class Channel(Taking, redis.Channel):
    """kombu's Redis channel, taking with ``TAKE``."""


class SentinelChannel(Taking, redis.SentinelChannel):
    """kombu's Sentinel channel, taking with ``TAKE`` from the master the Sentinels name, and publishing only
    what a replica has too (``store.connect.redis.replicated``): a publish to a master the Sentinels have just
    failed over is acknowledged, then dropped as it resyncs, so it fails instead and Celery publishes again on a
    new connection, to the new master."""

    #: kombu's publish batches are sent by kombu, past the replica's check: each publish goes alone.
    supports_batch_publish = False

    def _published(self, client: Any, pipe: Any) -> None:
        replicated(client, pipe)


class Transport(redis.Transport):
    """kombu's Redis transport with ``Channel``: ``redis://`` and ``rediss://``."""

    Channel = Channel


class SocketTransport(Transport):
    """``Transport`` on a Unix socket: its URL, ``socket:///path?virtual_host=DB``, is kombu's channel's own
    to read (kombu would take ``redis+socket://`` to mean its own transport, whatever Celery names)."""

    can_parse_url = True


class SentinelTransport(redis.SentinelTransport):
    """kombu's Sentinel transport with ``SentinelChannel``."""

    Channel = SentinelChannel
