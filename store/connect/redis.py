"""Every Redis client of ours, made one way: the cache, rate limits, coalescing, the document clock, the
leftover pool and the queue-depth probe (kombu makes the broker's own, from ``store.broker.config``)."""

from __future__ import annotations

from typing import Any

from redis.exceptions import RedisError

from store.settings import NetworkSettings
from store.settings.network import redis_options

__all__ = ["REDIS_ERRORS", "redis_client"]

#: What a Redis client raises when its server is down, restarting or silent: redis-py's errors, and the
#: socket's own (OSError) where redis-py lets them through.
REDIS_ERRORS: tuple[type[Exception], ...] = (RedisError, OSError)


def redis_client(url: str, network: NetworkSettings | None = None, *, timeout: float | None,
                 connect_timeout: float | None = None) -> Any:
    """A redis-py client for ``url``: ``redis_options`` for ``network``, ``timeout`` seconds per command (None:
    none; the health check and TCP_USER_TIMEOUT bound a silent peer), ``connect_timeout`` to connect (default
    ``timeout``, else the network's), and no retry of a timed-out command: its caller decides."""
    import redis

    options = redis_options(url, network or NetworkSettings())
    if timeout is not None:
        options["socket_timeout"] = timeout
    if connect_timeout is not None or timeout is not None:
        options["socket_connect_timeout"] = connect_timeout if connect_timeout is not None else timeout
    return redis.Redis.from_url(url, retry_on_timeout=False, **options)
