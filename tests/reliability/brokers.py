"""The brokers the reliability rig and the chaos run stand a system on, each as teams deploy it, with the faults
that apply to it.

============  ====================================================================================================
``redis``     one redis-server with AOF (``appendfsync always``) on TCP: broker and cache
``rediss``    the same over TLS only (``rediss://…?ssl_ca_certs=``): broker and cache
``socket``    the same on a Unix socket only (the rig's scenarios; a socket crosses no network, so no silence)
``sentinel``  a master and a replica, both with AOF, and one Sentinel (quorum 1): the workers and the cache take
              the ``sentinel://`` URL; a restart is the master killed and started again (the Sentinel fails over
              to the replica if it stays down past 1 s; the old master comes back as a replica), and ``failover``
              is ``SENTINEL FAILOVER``
``rabbitmq``  the machine's RabbitMQ, on a virtual host of the run's own (``amqp_vhost``), reached through a relay
              on the run's address (RabbitMQ listens on loopback only, which a network namespace cannot reach;
              the relay is what a silence cuts); a restart is ``rabbitmqctl stop_app`` / ``start_app``, which
              closes and reopens its listeners and every connection. The cache, pushes and locks are on a Redis
              (AOF) of the run's own
============  ====================================================================================================

Each is a ``Broker``: ``url`` and ``cache_url`` for the settings, ``start``, ``restart``, ``close``, the ``ports``
a silence cuts, and ``faults``, the kinds of fault of its own that ``inject`` does.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import ClassVar

from tests.reliability.relay import Relay
from tests.services import (
    AMQP_URL,
    SentinelGroup,
    amqp_answers,
    amqp_vhost,
    free_port,
    redis_answers,
    redis_listen,
    redis_server_binary,
)
from tests.workers import wait_for

__all__ = ["BROKERS", "Broker", "RabbitMQ", "Redis", "Sentinel", "make_broker", "with_db"]

#: The brokers a chaos run takes (``--broker``).
BROKERS = ("redis", "rediss", "sentinel", "rabbitmq")


def with_db(url: str, db: int) -> str:
    """A Redis URL of any form (``store.connect.redis_urls``) at database ``db``, its options kept: the cache's
    URL beside the broker's (a ``rsplit("/")`` cut a ``rediss://`` URL's query in two)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme in ("redis+socket", "unix"):
        query = dict(urllib.parse.parse_qsl(parts.query))
        query.pop("virtual_host", None)
        return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode({**query, "db": db})))
    if parts.scheme in ("redis", "rediss", "sentinel"):
        return urllib.parse.urlunsplit(parts._replace(path=f"/{db}"))
    raise ValueError(f"not a Redis URL: {url}")


class Broker:
    """What the rig and the chaos run need of a broker."""

    #: The name a chaos run takes it by (``BROKERS``).
    kind = ""
    #: Kinds of fault of this broker's own, beyond the common ones (``inject`` does them).
    faults: ClassVar[tuple[str, ...]] = ()
    #: The broker's URL, as the settings give it to workers and producers.
    url: str
    #: The cache's (and the pushes' and the locks'): a Redis.
    cache_url: str
    #: What befell it: (seconds from ``started_at``, what), for a run's report to line up with what it lost (a
    #: chaos run sets ``started_at`` to its own start).
    events: list[tuple[float, str]]
    started_at: float = 0.0

    def event(self, what: str) -> None:
        self.events.append((time.monotonic() - self.started_at, what))

    def start(self) -> None:
        raise NotImplementedError

    def restart(self, *, down_seconds: float = 1.0) -> None:
        """The broker goes away (its connections with it) for ``down_seconds``, then comes back."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop it for good: a restart still under way starts nothing again."""
        raise NotImplementedError

    def ports(self) -> list[int]:
        """The ports a silence of the broker cuts (those on the address the workers reach)."""
        raise NotImplementedError

    def inject(self, kind: str, seconds: float) -> bool:
        """Do the fault ``kind`` (one of ``faults``); whether it found something to hit."""
        raise ValueError(f"{type(self).__name__} has no fault {kind!r}")


class Redis(Broker):
    """A redis-server of the rig's own, that a scenario can kill and start again (with or without AOF),
    listening on ``host`` in ``form``: ``tcp``, ``tls`` (TLS only, a certificate made for ``host``) or ``socket``
    (a Unix socket only). The cache is its database 1."""

    faults = ()

    def __init__(self, folder: Path, *, persistent: bool, host: str = "127.0.0.1", form: str = "tcp") -> None:
        self.folder, self.persistent, self.port, self.host, self.form = folder, persistent, free_port(), host, form
        self.listen, self.url = redis_listen(form, folder, self.port, host)
        self.cache_url = with_db(self.url, 1)
        self.kind = {"tcp": "redis", "tls": "rediss"}.get(form, form)
        self.events = []
        self.process: subprocess.Popen[bytes] | None = None
        #: Every server start() began, so that close() leaves none behind.
        self.started: list[subprocess.Popen[bytes]] = []
        #: Set by ``close``: a restart still sleeping then starts nothing (the chaos run's ended with a
        #: redis-server that nothing stopped).
        self.closed = False

    def start(self) -> None:
        if self.closed:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        aof = ["--appendonly", "yes", "--appendfsync", "always"] if self.persistent else ["--appendonly", "no"]
        self.process = process = subprocess.Popen(
            [
                redis_server_binary()[0],
                *self.listen,
                "--bind",
                self.host,
                "--save",
                "",
                # clients from another address than loopback (a network namespace's) would be refused
                "--protected-mode",
                "no" if self.host != "127.0.0.1" else "yes",
                "--dir",
                str(self.folder),
                *aof,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.started.append(process)
        try:
            wait_for(lambda: redis_answers(self.url), timeout=10, what="redis-server to start")
        finally:
            if self.closed:  # closed while this started it
                process.kill()
                process.wait(timeout=10)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)

    def restart(self, *, down_seconds: float = 1.0) -> None:
        self.kill()
        self.event("killed")
        time.sleep(down_seconds)
        self.start()
        self.event("started again")

    def close(self) -> None:
        """Kill it for good: no restart under way starts it again, and every server it ever started is gone (a
        chaos run left one running: a restart whose server did not answer in time raised before its caller
        could kill it)."""
        self.closed = True
        self.kill()
        for process in self.started:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)

    def ports(self) -> list[int]:
        return [] if self.form == "socket" else [self.port]


class Sentinel(Broker):
    """A master and a replica, both with AOF, and one Sentinel (``tests.services.SentinelGroup``) on ``host``;
    broker and cache (database 1) through the ``sentinel://`` URL."""

    kind = "sentinel"
    faults = ("failover",)

    def __init__(self, folder: Path, *, host: str = "127.0.0.1") -> None:
        self.group = SentinelGroup(folder, host=host, persistent=True)
        self.url = self.group.url
        self.cache_url = with_db(self.url, 1)
        self.events = []
        self.closed = False
        self.lock = threading.Lock()
        #: Failovers seen: (what, old master's port, new master's port).
        self.failovers: list[tuple[str, int, int]] = []

    def start(self) -> None:
        self.group.start()
        # a start that found a port taken started the group again on fresh ports: the Sentinel's may be another
        self.url = self.group.url
        self.cache_url = with_db(self.url, 1)
        self.started_at = time.monotonic()

    def restart(self, *, down_seconds: float = 1.0) -> None:
        """kill -9 of the master; started again after ``down_seconds``. Past about 1 s down the Sentinel fails
        over to the replica, and the old master comes back as its replica (its config file, rewritten by the
        Sentinel, says so); sooner, it comes back as the master, from its AOF."""
        with self.lock:
            port = self.group.master_port()
            self.group.kill(port)
        self.event(f"master {port} killed")
        time.sleep(down_seconds)
        with self.lock:
            if not self.closed:
                self.group.start_server(port)
                self.event(f"{port} started again (the Sentinel names {self.group.master_port()})")

    def kill_master(self, *, timeout: float = 30, switched: Callable[[], None] = lambda: None) -> tuple[int, int]:
        """kill -9 of the master, kept down until the Sentinel has failed over (then ``switched`` is called), then
        started again: it comes back as the replica. (The old master's port, the new one's.)"""
        old = self.group.master_port()
        self.group.kill(old)
        wait_for(lambda: self.group.master_port() != old, timeout=timeout, what="the Sentinel to fail over")
        switched()
        self.group.start_server(old)
        new = self.group.wait_for_failover(old, timeout=timeout)
        self.failovers.append(("kill -9", old, new))
        return old, new

    def failover(self, *, timeout: float = 60, switched: Callable[[], None] = lambda: None) -> tuple[int, int]:
        """``SENTINEL FAILOVER``; ``switched`` is called once the Sentinel names the new master, and this returns
        once the old one is its replica, in sync. (The old master's port, the new one's.)"""
        old = self.group.failover(timeout=timeout, wait=False)
        self.event(f"SENTINEL FAILOVER of {old}")
        wait_for(lambda: self.group.master_port() != old, timeout=timeout, what="the Sentinel to fail over")
        self.event(f"the Sentinel names {self.group.master_port()}")
        switched()
        wait_for(lambda: self.group.role(old) == "slave", timeout=timeout, what="the old master to become a replica")
        self.event(f"{old} a replica")
        new = self.group.wait_for_failover(old, timeout=timeout)
        self.failovers.append(("SENTINEL FAILOVER", old, new))
        return old, new

    def inject(self, kind: str, seconds: float) -> bool:
        if kind != "failover":
            return super().inject(kind, seconds)
        if self.closed:
            return False
        self.failover()
        return True

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.group.close()

    def ports(self) -> list[int]:
        return [*self.group.ports, self.group.sentinel_port]


class RabbitMQ(Broker):
    """The machine's RabbitMQ (``tests.services.AMQP_URL``) on a virtual host ``vhost`` of its own, reached through
    a ``Relay`` on ``host``; the cache on a Redis with AOF of its own."""

    kind = "rabbitmq"
    faults = ()

    def __init__(self, folder: Path, *, host: str = "127.0.0.1", vhost: str = "") -> None:
        self.folder, self.host = folder, host
        self.vhost = vhost or f"vectorsync-chaos-{os.getpid()}-{next(_VHOSTS)}"
        self.cache = Redis(folder / "cache", persistent=True, host=host)
        self.cache_url = self.cache.cache_url
        self.stack = ExitStack()
        self.events = []
        self.relay: Relay | None = None
        self.url = ""
        self.closed = False
        self.lock = threading.Lock()

    def start(self) -> None:
        if not amqp_answers():
            raise RuntimeError(f"RabbitMQ does not answer at {AMQP_URL} (rabbitmq-server -detached starts it)")
        parts = urllib.parse.urlsplit(AMQP_URL)
        url = self.stack.enter_context(amqp_vhost(AMQP_URL, self.vhost))
        if url == AMQP_URL:
            raise RuntimeError("rabbitmqctl could not make a virtual host: a chaos run keeps to one of its own")
        self.relay = Relay(self.host, (parts.hostname or "127.0.0.1", parts.port or 5672))
        self.stack.callback(self.relay.close)
        self.url = urllib.parse.urlunsplit(
            urllib.parse.urlsplit(url)._replace(
                netloc=f"{parts.username}:{parts.password}@{self.host}:{self.relay.port}"
            )
        )
        self.cache.start()
        self.stack.callback(self.cache.close)

    def restart(self, *, down_seconds: float = 1.0) -> None:
        """``rabbitmqctl stop_app``: RabbitMQ closes every connection and its listeners (its node stays up);
        ``start_app`` after ``down_seconds`` opens them again, its durable queues and persistent messages back
        from disk."""
        with self.lock:
            if self.closed:
                return
            _rabbitmqctl("stop_app")
        self.event("stop_app")
        try:
            time.sleep(down_seconds)
        finally:
            with self.lock:  # started again whatever happened: the machine's RabbitMQ is not left stopped
                _rabbitmqctl("start_app")
        wait_for(amqp_answers, timeout=60, what="RabbitMQ to answer again")
        self.event("start_app, answering")

    def close(self) -> None:
        with self.lock:
            self.closed = True
        self.stack.close()

    def ports(self) -> list[int]:
        return [self.relay.port] if self.relay is not None else []


_VHOSTS = itertools.count(1)


def _rabbitmqctl(*args: str) -> None:
    done = subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise RuntimeError(f"rabbitmqctl {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")


def make_broker(kind: str, folder: Path, *, host: str = "127.0.0.1") -> Broker:
    """The broker ``kind`` (``BROKERS``) in ``folder``, on ``host``, not yet started."""
    if kind in ("redis", "rediss"):
        return Redis(folder / "redis", persistent=True, host=host, form="tls" if kind == "rediss" else "tcp")
    if kind == "sentinel":
        return Sentinel(folder / "sentinel", host=host)
    if kind == "rabbitmq":
        return RabbitMQ(folder, host=host)
    raise ValueError(f"no broker {kind!r}: take one of {', '.join(BROKERS)}")
