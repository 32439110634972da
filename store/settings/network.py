"""``[network]``, and what it becomes on each kind of connection, so that a peer gone silent (a
partition: packets dropped, no refusal) is noticed in seconds, not after the system's two hours.

- PostgreSQL (libpq): ``connect_timeout``, ``keepalives*`` and ``tcp_user_timeout`` on the client's end
  (``libpq_parameters``, which a URL's own parameters override); the same on the server's end as
  session settings (``server_settings``), so that a server whose client went silent ends that session, and with it the
  transaction and the advisory locks it holds, instead of keeping them until its own keepalive (two hours
  by default) while the client's retry waits on them.
- Redis (redis-py, also under kombu): TCP keepalive with these intervals, TCP_USER_TIMEOUT, the connect
  timeout and the health check (``redis_options``; ``store.connect.redis`` makes every client with them).
- AMQP (py-amqp): the same TCP options as ``socket_settings`` (``tcp_options``).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from store.settings.section import Section

__all__ = ["SERVER_SETTINGS", "NetworkSettings", "libpq_parameters", "redis_options", "server_settings", "tcp_options"]


class NetworkSettings(Section):
    """How every connection to PostgreSQL and Redis (the broker's too) notices a peer gone silent: a
    partition drops packets without a refusal, and a connection left to the system's defaults waits for
    hours (the functions below set them on each kind of connection). Keep the time they add up to
    well under ``worker.time_limit``: a task that hits its limit is killed, not retried."""

    #: Seconds to open a connection: libpq's connect_timeout (2 at least), Redis's, the broker's.
    connect_timeout: int = Field(default=10, ge=2)
    #: Seconds a connection may sit idle before TCP keepalive probes start, on both ends of a PostgreSQL
    #: connection (the server's as session settings, so it ends the session, and lets go of its locks,
    #: when the client goes silent) and on Redis connections.
    keepalive_idle: int = Field(default=15, gt=0)
    #: Seconds between keepalive probes.
    keepalive_interval: int = Field(default=5, gt=0)
    #: Unanswered probes after which the connection is dropped: idle 15 + 3 probes of 5 = 30 s by default.
    keepalive_count: int = Field(default=3, gt=0)
    #: Seconds data sent may stay unacknowledged before the connection is dropped (TCP_USER_TIMEOUT), on
    #: PostgreSQL connections (both ends) and Redis ones. 0: the system's, about 15 minutes. At most a day
    #: (the socket option holds milliseconds in 32 bits).
    tcp_user_timeout: float = Field(default=30, ge=0, le=86_400)
    #: Seconds a Redis connection may sit idle before it is checked with a PING before use; also how often
    #: the broker's consumer checks that its waiting connections still answer (0: off).
    health_check_interval: int = Field(default=15, ge=0)


#: The server's setting for each libpq parameter of the client's end, all settable by any session.
SERVER_SETTINGS = {
    "keepalives_idle": "tcp_keepalives_idle",
    "keepalives_interval": "tcp_keepalives_interval",
    "keepalives_count": "tcp_keepalives_count",
    "tcp_user_timeout": "tcp_user_timeout",
}
#: TCP_USER_TIMEOUT where the socket module lacks the name (Linux's number).
_TCP_USER_TIMEOUT = getattr(socket, "TCP_USER_TIMEOUT", 18)


def _milliseconds(seconds: float) -> int:
    return round(seconds * 1000)


def libpq_parameters(network: NetworkSettings) -> dict[str, int]:
    """libpq connection parameters for the client's end of a PostgreSQL connection."""
    return {
        "connect_timeout": network.connect_timeout,
        "keepalives": 1,
        "keepalives_idle": network.keepalive_idle,
        "keepalives_interval": network.keepalive_interval,
        "keepalives_count": network.keepalive_count,
        "tcp_user_timeout": _milliseconds(network.tcp_user_timeout),
    }


def server_settings(parameters: Mapping[str, object]) -> dict[str, str]:
    """The server's end's settings that match the client's libpq ``parameters`` (those of
    ``libpq_parameters``, as a URL may have changed them): the same keepalive intervals and TCP_USER_TIMEOUT
    (the server ignores them on a Unix socket)."""
    return {server: str(parameters[client]) for client, server in SERVER_SETTINGS.items() if client in parameters}


def tcp_options(network: NetworkSettings) -> dict[int, int]:
    """TCP socket options (``IPPROTO_TCP`` level) by number: keepalive intervals and TCP_USER_TIMEOUT."""
    options = {_TCP_USER_TIMEOUT: _milliseconds(network.tcp_user_timeout)}
    for name, value in (
        ("TCP_KEEPIDLE", network.keepalive_idle),
        ("TCP_KEEPINTVL", network.keepalive_interval),
        ("TCP_KEEPCNT", network.keepalive_count),
    ):
        if hasattr(socket, name):  # Linux has all three; macOS lacks TCP_KEEPIDLE (it has TCP_KEEPALIVE)
            options[getattr(socket, name)] = value
    return options


def redis_options(url: str, network: NetworkSettings) -> dict[str, Any]:
    """redis-py connection options for ``url``: keepalive, TCP_USER_TIMEOUT, the health check and the connect
    timeout on TCP (``redis://``, ``rediss://``, ``sentinel://``); the health check alone on a Unix socket."""
    if url.startswith(("redis+socket://", "unix://")):
        return {"health_check_interval": network.health_check_interval}
    return {
        "socket_keepalive": True,
        "socket_keepalive_options": tcp_options(network),
        "socket_connect_timeout": network.connect_timeout,
        "health_check_interval": network.health_check_interval,
    }
