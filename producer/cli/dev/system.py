"""What one run of ``vectorsync dev`` started, so that everything can be stopped: its services, its Celery
workers (each started again when it exits on its own, a few times), and the environment they run in."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from rich.text import Text

from producer.cli.console import out
from producer.cli.dev.processes import DevServiceError, Processes, Service, tail, wait_until
from producer.cli.dev.services import Postgres
from store.calls.threads import PROCESSES_ENV
from store.contract import BULK_QUEUE, LIVE_QUEUE

__all__ = [
    "MAX_WORKER_RESTARTS",
    "WORKER_START_SECONDS",
    "DevSystem",
    "child_env",
    "is_setting",
    "wait_for_workers",
    "worker_command",
    "worker_root",
]

#: Times one worker that exits on its own is started again before `vectorsync dev` gives up.
MAX_WORKER_RESTARTS = 3
#: Seconds to wait for a worker to answer a ping (the first start imports a lot).
WORKER_START_SECONDS = 120.0


def worker_root() -> Path:
    """The folder that holds the ``worker`` package (a checkout's root, or site-packages)."""
    spec = importlib.util.find_spec("worker")
    if spec is None or spec.origin is None:
        raise DevServiceError("the `worker` package does not import: install vectorsync (pip install -e .)")
    return Path(spec.origin).resolve().parent.parent


def is_setting(name: str) -> bool:
    """Whether an environment variable changes vectorsync's settings (VECTORSYNC_CONFIG, VECTORSYNC_<S>__<KEY>)."""
    return name == "VECTORSYNC_CONFIG" or (name.startswith("VECTORSYNC_") and "__" in name)


def child_env(config: Path, root: Path, checkout: bool, workers: int) -> dict[str, str]:
    """The environment of the workers and Flower: the dev settings file alone (no ``VECTORSYNC_*`` of this shell), a
    checkout's root on PYTHONPATH, and the cores shared between ``workers`` processes."""
    env = {k: v for k, v in os.environ.items() if not is_setting(k)}
    env["VECTORSYNC_CONFIG"] = str(config)
    env["PYTHONUNBUFFERED"] = "1"
    if checkout:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    # The single-process workers share the cores: a local model in each takes cores // workers threads.
    env.setdefault(PROCESSES_ENV, str(workers))
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def worker_command(number: int) -> list[str]:
    """Celery worker ``dev<number>``: one process, both queues, task events on (for Flower)."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "worker",
        "worker",
        "--loglevel",
        "INFO",
        "-c",
        "1",
        "-n",
        f"dev{number}@%h",
        "-Q",
        f"{LIVE_QUEUE},{BULK_QUEUE}",
        "--without-gossip",
        "--without-mingle",
        "-E",
    ]


class DevSystem:
    """One run of ``vectorsync dev``: what it started, so that everything can be stopped."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.logs = folder / "logs"
        self.processes = Processes(self.logs)
        self.postgres: Postgres | None = None
        self.closers: list[Any] = []
        self.workers: list[Service] = []
        self.flower: Service | None = None
        #: How each worker was started, to start it again: name -> (command, env, cwd).
        self.launches: dict[str, tuple[list[str], dict[str, str], Path]] = {}
        self.restarts: dict[str, int] = {}

    def start_worker(self, name: str, command: list[str], env: dict[str, str], cwd: Path) -> Service:
        """Start a worker, remembering how, so that ``check_alive`` can start it again."""
        self.launches[name] = (command, env, cwd)
        service = self.processes.start(name, command, env=env, cwd=cwd, tier=1)
        self.workers.append(service)
        return service

    def stop(self) -> None:
        """Close what this process opened, then stop every child (workers and Flower first) and PostgreSQL."""
        for closer in reversed(self.closers):
            with contextlib.suppress(Exception):
                closer()
        self.closers.clear()
        self.processes.stop_all(lambda line: out.print(f"  {line}", highlight=False))
        if self.postgres is not None:
            out.print(f"  stopping PostgreSQL (pid {self.postgres.pid})", highlight=False)
            self.postgres.stop()
            self.postgres = None

    def check_alive(self) -> None:
        """Start again a worker that exited on its own (``MAX_WORKER_RESTARTS`` times at most); raise
        DevServiceError, with the end of its log, for another child that exited or for PostgreSQL gone."""
        for service in list(self.processes.services):
            if service.running():
                continue
            ended = (
                f"{service.name} (pid {service.pid}) exited with code {service.process.returncode}; "
                f"the end of {service.log}:\n{tail(service.log)}"
            )
            tries = self.restarts.get(service.name, 0)
            if service.name not in self.launches or tries >= MAX_WORKER_RESTARTS:
                raise DevServiceError(ended + (f"\n(restarted {tries} times already)" if tries else ""))
            self.restarts[service.name] = tries + 1
            out.print(Text(f"{ended}\nrestarting {service.name} ({tries + 1} of {MAX_WORKER_RESTARTS})"))
            self.processes.services.remove(service)
            self.workers.remove(service)
            self.start_worker(service.name, *self.launches[service.name])
        if self.postgres is not None and self.postgres.pid is not None:
            import psutil

            if not psutil.pid_exists(self.postgres.pid):
                raise DevServiceError(f"PostgreSQL stopped; see {self.postgres.folder / 'log'}")


def wait_for_workers(dev: DevSystem, producer: Any, count: int) -> list[str]:
    """The names of the ``count`` workers once each answers a ping; DevServiceError, with the end of its log, for
    one that exits or does not answer within ``WORKER_START_SECONDS``."""
    expected = {f"dev{n}@" for n in range(1, count + 1)}

    def answered() -> list[str] | None:
        replies = producer.app.control.ping(timeout=0.5) or []
        names = sorted(name for reply in replies for name in reply)
        return names if {name.split("@")[0] + "@" for name in names} >= expected else None

    def alive() -> bool:
        return all(service.running() for service in dev.workers)

    names = wait_until(answered, timeout=WORKER_START_SECONDS, every=0.5, alive=alive)
    if names:
        return names
    failed = next((s for s in dev.workers if not s.running()), dev.workers[0])
    raise DevServiceError(f"worker {failed.name} did not start; the end of {failed.log}:\n{tail(failed.log)}")
