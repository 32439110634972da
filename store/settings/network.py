"""What the ``[network]`` settings become on each kind of connection, so that a peer gone silent (a
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

from store.settings import NetworkSettings

__all__ = ["SERVER_SETTINGS", "libpq_parameters", "redis_options", "server_settings", "tcp_options"]

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
