"""Start Flower only behind a login: ``python -m worker.runtime.flower [flower options]``.

Flower's API can enqueue any task by name, a full reindex that empties a
collection included: access to Flower is write access to the index. So it
starts only when ``FLOWER_BASIC_AUTH`` (user:password, comma-separated for
several) or ``FLOWER_AUTH`` (OAuth) is set, and never with the example's
placeholder password.

Flower runs in this process (``serve``), with one change: its thread pool,
where it runs every inspect broadcast, is ``DaemonThreadPool``. Flower's own
is a ``ThreadPoolExecutor``, whose threads Python joins at exit before any
``atexit`` hook (Flower's own ``stop`` among them) runs; each thread first
finishes the broadcast it is in (``inspect_timeout`` after its last reply),
then every queued one. So a Ctrl-C or SIGTERM that landed while inspect
calls were in flight or queued left Flower waiting for them: seconds, or past
a test's 20 s on a loaded machine. A broadcast's answer is worth nothing once
Flower stops, so the threads are daemons, queued calls are cancelled, and
Flower exits at once.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NoReturn

__all__ = ["PLACEHOLDER", "DaemonThreadPool", "login_problem", "main", "serve"]

#: The password the example files show; a real deployment replaces it.
PLACEHOLDER = "change-me"

_Call = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


def login_problem(env: Mapping[str, str], argv: Sequence[str] = ()) -> str | None:
    """Why Flower must not start with this environment and these arguments, or None when its login is set and
    nothing turns it off for the API."""
    unauthenticated = env.get("FLOWER_UNAUTHENTICATED_API", "").strip().lower() not in ("", "0", "false", "no")
    if unauthenticated or any(arg.split("=")[0] == "--unauthenticated_api" for arg in argv):
        return (
            "Flower's API would answer without a login (FLOWER_UNAUTHENTICATED_API or "
            "--unauthenticated_api): remove it. The API can enqueue any task, so it is write access to "
            "the index"
        )
    basic, oauth = env.get("FLOWER_BASIC_AUTH", "").strip(), env.get("FLOWER_AUTH", "").strip()
    if not basic and not oauth:
        return (
            "Flower has no login: set FLOWER_BASIC_AUTH=user:password (deploy/.env, or the Kubernetes "
            "Secret). Its API can enqueue any task, so access to it is write access to the index"
        )
    pairs = [pair for pair in basic.split(",") if pair]
    if any(":" not in pair or not pair.split(":", 1)[1] for pair in pairs):
        return "FLOWER_BASIC_AUTH must be user:password pairs, comma-separated, each with a password"
    if any(pair.split(":", 1)[1] == PLACEHOLDER for pair in pairs):
        return f"FLOWER_BASIC_AUTH still has the example's password {PLACEHOLDER!r}: choose a real one"
    return None


class DaemonThreadPool(ThreadPoolExecutor):
    """An executor of daemon threads that the interpreter's exit does not wait for (see the module docstring).

    A ``ThreadPoolExecutor`` by type only (asyncio takes nothing else as a loop's default executor): it runs
    calls in threads of its own, started as calls need them, up to ``max_workers`` (the same default).
    """

    def __init__(self, max_workers: int | None = None) -> None:
        super().__init__(max_workers)  # starts no thread: only for what asyncio and others may read
        self.max_workers = max_workers or min(32, (os.cpu_count() or 1) + 4)
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._daemons: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Run ``fn(*args, **kwargs)`` in a pool thread. Raises RuntimeError after ``shutdown``."""
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new calls after shutdown")
            self._calls.put((future, fn, args, kwargs))
            if self._idle:
                self._idle -= 1
            elif len(self._daemons) < self.max_workers:
                thread = threading.Thread(target=self._work, name=f"flower-pool-{len(self._daemons)}", daemon=True)
                thread.start()
                self._daemons.append(thread)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Take no more calls; always cancel the queued ones (their answers are not waited for); with
        ``wait``, join the threads."""
        with self._lock:
            self._closed = True
            threads = list(self._daemons)
        while True:
            try:
                call = self._calls.get_nowait()
            except queue.Empty:
                break
            if call is not None:
                call[0].cancel()
        for _ in threads:
            self._calls.put(None)
        if wait:
            for thread in threads:
                thread.join()

    def _work(self) -> None:
        while (call := self._calls.get()) is not None:
            future, fn, args, kwargs = call
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as exc:  # as ThreadPoolExecutor: the caller gets it from the future
                    future.set_exception(exc)
            with self._lock:
                self._idle += 1


def serve(argv: Sequence[str]) -> NoReturn:
    """Run ``celery -A worker flower ARGV`` in this process with ``DaemonThreadPool``; no login check (for
    ``vectorsync dev``, which binds it to 127.0.0.1). Exits with Flower's code: 0 after Ctrl-C or SIGTERM."""
    from celery.bin.celery import celery
    from flower.app import Flower

    Flower.pool_executor_cls = DaemonThreadPool
    # SIGINT left ignored or blocked by whatever started this process survives exec, and Python then installs
    # no KeyboardInterrupt for it (seen under pytest-xdist): Ctrl-C stops Flower whatever its parent did.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.signal(signal.SIGINT, signal.default_int_handler)
    celery.main(args=["-A", "worker", "flower", *argv], prog_name="celery")
    raise SystemExit(0)  # pragma: no cover - click's main exits


def main(argv: Sequence[str]) -> int:
    problem = login_problem(os.environ, argv)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    serve(argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
