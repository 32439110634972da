"""Every Redis client of ours, made one way: the cache, rate limits, coalescing, the document clock, the
leftover pool and the queue-depth probe (kombu makes the broker's own, from ``store.broker.config``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

from redis.exceptions import RedisError

from store.connect.redis_urls import parse_redis_url
from store.errors import StoreUnavailable
from store.settings import NetworkSettings
from store.settings.network import redis_options

__all__ = ["REDIS_ERRORS", "REPLICA_WAIT_MS", "redis_client", "replicated", "unavailable"]

#: What a Redis client raises when its server is down, restarting or silent: redis-py's errors, and the
#: socket's own (OSError) where redis-py lets them through.
REDIS_ERRORS: tuple[type[Exception], ...] = (RedisError, OSError)


def redis_client(
    url: str, network: NetworkSettings | None = None, *, timeout: float | None, connect_timeout: float | None = None
) -> Any:
    """A redis-py client for ``url``: ``redis_options`` for ``network``, ``timeout`` seconds per command (None:
    none; the health check and TCP_USER_TIMEOUT bound a silent peer), ``connect_timeout`` to connect (default
    ``timeout``, else the network's), and no retry of a timed-out command: its caller decides. Every form of
    ``store.connect.redis_urls`` is taken: TCP, TLS, a Unix socket, and a Sentinel's master (found again
    after a failover)."""
    import redis

    options = redis_options(url, network or NetworkSettings())
    if timeout is not None:
        options["socket_timeout"] = timeout
    if connect_timeout is not None or timeout is not None:
        options["socket_connect_timeout"] = connect_timeout if connect_timeout is not None else timeout
    parsed = parse_redis_url(url)  # a ConfigError for a URL that is wrong, before redis-py takes it
    if parsed.form in ("tcp", "tls"):
        return redis.Redis.from_url(url, retry_on_timeout=False, **options)
    if parsed.form == "socket":
        options.pop("socket_connect_timeout", None)
        socket_url = f"unix://{quote(parsed.path)}?db={parsed.db}"
        return redis.Redis.from_url(socket_url, retry_on_timeout=False, **parsed.client_options(), **options)
    from redis.sentinel import Sentinel

    sentinels = Sentinel(list(parsed.hosts), **{k: v for k, v in options.items() if k.startswith("socket_")})
    return sentinels.master_for(
        parsed.master_name, retry_on_timeout=False, db=parsed.db, **parsed.client_options(), **options
    )


#: How long a write that must outlive a Sentinel failover waits for a replica to have it, milliseconds.
REPLICA_WAIT_MS = 1000


def replicated(client: Any, pipe: Any) -> list[Any]:
    """Send ``pipe``'s commands to a Sentinel's master, then wait for one replica to have them (``WAIT``); their
    replies. A master no replica follows any more (the Sentinels promoted one: it keeps taking writes for some
    8 s, until they make it a replica, and then drops them) raises ConnectionError, having closed ``client``'s
    connections, so the caller's next try asks the Sentinels for the master again."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    pipe.execute_command("WAIT", 1, REPLICA_WAIT_MS)
    *replies, replicas = list(pipe.execute())
    if int(replicas) < 1:
        client.connection_pool.disconnect()
        raise RedisConnectionError(
            f"no replica of the Sentinels' master had the write within {REPLICA_WAIT_MS} ms: it may have "
            "been failed over, or have no replica left; the write is not taken as done"
        )
    return replies


@contextmanager
def unavailable(what: str, fix: str = "") -> Iterator[None]:
    """Where a Redis that is down or silent must stop the caller (not degrade it, as the cache does): what it
    raises becomes StoreUnavailable, "``what``: the error; ``fix``", which tasks retry and the CLI shows."""
    try:
        yield
    except REDIS_ERRORS as exc:
        raise StoreUnavailable(f"{what}: {exc}" + (f"; {fix}" if fix else "")) from exc
