"""The children of ``vectorsync dev``, each started from package code in a session of its own, so that a Ctrl-C
reaches only ``vectorsync dev``, which then stops them in order; on Linux each child also gets SIGTERM if
``vectorsync dev`` dies. ``Processes.stop`` terminates, waits, kills what is left, and then kills any descendant
that outlived its parent (a Celery pool process, say). And the small tools every start uses: a free port, a
log's last lines, a poll until something answers.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = ["STOP_SECONDS", "DevServiceError", "Processes", "Service", "free_port", "tail", "wait_until"]

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
