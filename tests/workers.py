"""Real ``celery worker`` processes for integration tests, and the ``vectorsync`` command run as a script or on a
terminal would run it. The table they index is in ``tests.crm``; their settings files, in ``tests.settings_files``."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
from celery import Celery

from store.broker.config import celery_config
from store.contract import BULK_QUEUE, LIVE_QUEUE
from store.settings import load_settings

__all__ = [
    "METRICS_FOLDER_ENV",
    "ROOT",
    "celery_worker",
    "child_env",
    "pool_processes",
    "process_env",
    "run_cli",
    "run_on_terminal",
    "wait_for",
]

ROOT = Path(__file__).resolve().parent.parent

#: The multiprocess metrics folder prometheus_client reads (worker.metrics.series sets it when the app is imported).
METRICS_FOLDER_ENV = "PROMETHEUS_MULTIPROC_DIR"


def wait_for(check: Callable[[], Any], *, timeout: float = 120, every: float = 0.2, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def child_env() -> dict[str, str]:
    """This environment for a child process, less what this test process picked up: VECTORSYNC_ settings,
    and the metrics folder that importing the worker app made for this process (a child sharing it shared
    its prometheus files and, in the full suite, no longer stopped on SIGINT)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("VECTORSYNC_") and k != METRICS_FOLDER_ENV}


def process_env(config: Path) -> dict[str, str]:
    """This environment for a vectorsync process: no stray VECTORSYNC_ settings, ``config`` as the file."""
    env = child_env()
    env["VECTORSYNC_CONFIG"] = str(config)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@contextmanager
def celery_worker(
    config: Path,
    *,
    concurrency: int = 2,
    name: str = "w1",
    queues: tuple[str, ...] = (LIVE_QUEUE, BULK_QUEUE),
    prefix: Sequence[str] = (),
    celery: Sequence[str] = (sys.executable, "-m", "celery"),
    cwd: Path = ROOT,
    env: Mapping[str, str] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """``celery -A worker worker`` with these settings; yields once it answers a ping. ``prefix`` runs it
    through a command that execs it (``ip netns exec NAME``: the process is the worker itself); ``celery``,
    ``cwd`` and ``env`` (default: ``process_env``) are another environment's (an installed wheel's)."""
    log = open(config.parent / f"{name}.log", "wb")  # noqa: SIM115 - kept open for the process's life
    command = [
        *prefix,
        *celery,
        "-A",
        "worker",
        "worker",
        "--loglevel",
        os.environ.get("VECTORSYNC_TEST_WORKER_LOGLEVEL", "INFO"),
        "-c",
        str(concurrency),
        "-n",
        f"{name}@%h",
        "-Q",
        ",".join(queues),
        "--without-gossip",
        "--without-mingle",
        "-E",
    ]
    environment = dict(env) if env is not None else process_env(config)
    process = subprocess.Popen(command, cwd=cwd, env=environment, stdout=log, stderr=subprocess.STDOUT)
    app = Celery("vectorsync-test", set_as_current=False)
    app.conf.update(celery_config(load_settings(config)))
    try:
        # This worker's own answer: with another worker running, any answer to a broadcast ping came too soon.
        node = f"{name}@{socket.gethostname()}"
        wait_for(
            lambda: process.poll() is not None or app.control.ping(destination=[node], timeout=0.5),
            timeout=60,
            what=f"worker {name} to answer a ping",
        )
        if process.poll() is not None:
            raise AssertionError(f"worker {name} exited: {(config.parent / f'{name}.log').read_text()[-3000:]}")
        yield process
    finally:
        _stop(process)
        app.close()
        log.close()


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    children = psutil.Process(process.pid).children(recursive=True)
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
    for child in children:
        if child.is_running():
            child.kill()


def pool_processes(worker: subprocess.Popen[bytes]) -> list[psutil.Process]:
    """The prefork children of a worker: the processes that run tasks."""
    return psutil.Process(worker.pid).children()


def run_on_terminal(
    config: Path,
    *args: str,
    columns: int = 120,
    timeout: float = 120,
    answer: str | None = None,
    prompt: bytes = b"[y/N]",
) -> str:
    """Run ``vectorsync ARGS`` on a pseudo-terminal ``columns`` wide; what the screen got. ``answer`` is typed
    once ``prompt`` shows."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = process_env(config) | {"TERM": "xterm-256color", "COLUMNS": str(columns)}
    process = subprocess.Popen(
        [sys.executable, "-m", "producer.cli", *args],
        cwd=ROOT,
        env=env,
        stdin=child,
        stdout=child,
        stderr=child,
        close_fds=True,
    )
    os.close(child)
    output = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
            if answer is not None and prompt in output:
                os.write(main, answer.encode() + b"\n")
                answer = None
        elif process.poll() is not None:
            break
    process.wait(timeout=30)
    os.close(main)
    return output.decode(errors="replace")


def run_cli(config: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``vectorsync ARGS`` as a script would: output to a pipe, nothing on stdin."""
    return subprocess.run(
        [sys.executable, "-m", "producer.cli", *args],
        cwd=ROOT,
        env=process_env(config),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
