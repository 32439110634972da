"""A pool process writes each result frame whole (worker.runtime.prefork), even when the soft time limit's signal
arrives while it writes: billiard otherwise writes a second frame after the half-written first, and the
worker's main process, reading both as one, dies ("Unrecoverable error: UnicodeDecodeError")."""

from __future__ import annotations

import os
import pickle
import signal
import time
from typing import Any

from billiard.connection import Pipe

from worker.runtime.prefork import whole_frames

#: Larger than a pipe holds (64 KiB): the write blocks until the reader reads, as when the main process is busy.
RESULT = "x" * 300_000


class _SoftLimit(Exception):
    """What billiard's handler raises (SoftTimeLimitExceeded)."""


def _child(writer: Any, *, guarded: bool) -> None:
    """What billiard's work loop does with a task's result: put it; if that raises, put the error instead."""

    def raise_soft_limit(signum: int, frame: Any) -> None:
        raise _SoftLimit()

    signal.signal(signal.SIGUSR1, raise_soft_limit)
    plain = lambda obj: writer.send_bytes(pickle.dumps(obj))  # noqa: E731
    put = whole_frames(plain) if guarded else plain
    try:
        put(("READY", RESULT))
    except _SoftLimit:
        put(("READY", "the error"))
    os._exit(0)


def _frame_after_a_late_soft_limit(*, guarded: bool) -> object:
    reader, writer = Pipe(duplex=False)
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        _child(writer, guarded=guarded)
    writer.close()
    time.sleep(0.5)  # the child blocks in its write: the pipe is full
    os.kill(pid, signal.SIGUSR1)  # the soft limit, overdue
    time.sleep(0.2)
    try:
        return pickle.loads(reader.recv_bytes())
    except Exception as exc:  # what the main process's unpickling meets
        return exc
    finally:
        os.waitpid(pid, 0)
        reader.close()


def test_a_soft_limit_that_arrives_during_the_write_leaves_the_frame_whole() -> None:
    assert _frame_after_a_late_soft_limit(guarded=True) == ("READY", RESULT)


def test_without_it_the_frame_is_cut_and_followed_by_another() -> None:
    """The defect itself, so that the test above is known to meet it."""
    found = _frame_after_a_late_soft_limit(guarded=False)
    assert found != ("READY", RESULT)
    assert isinstance(found, Exception) or found == ("READY", "the error"), found


def test_the_worker_runs_this_pool() -> None:
    from worker.runtime.app import app

    assert app.conf.worker_pool == "worker.runtime.prefork:TaskPool"


def test_a_process_killed_before_the_consumer_runs_is_no_failure_to_start() -> None:
    """The broker was down at start; a pool process killed meanwhile made Celery give the worker up."""
    from types import SimpleNamespace

    from worker.runtime.prefork import TaskPool

    def pool(*exitcodes: int | None) -> Any:
        found = TaskPool.__new__(TaskPool)
        found._pool = SimpleNamespace(_pool=[SimpleNamespace(exitcode=code) for code in exitcodes])
        return found

    assert pool(None, None).did_start_ok() and pool(None, -9).did_start_ok()
    assert not pool(None, 1).did_start_ok()  # it exited by itself: it could not start
