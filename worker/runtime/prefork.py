"""The worker's prefork pool: Celery's, but a pool process writes each result to the main process whole.

The defect (billiard 4.3, as Celery 5.7 runs it): the main process arms a task's soft time limit and sends
SIGUSR1 when it is due. While the main process cannot read the pool's pipes (it waited on a broker gone
silent), a task that finished meanwhile blocks writing its result frame into a full pipe; the overdue signal
then arrives, SoftTimeLimitExceeded is raised inside the write, and billiard catches it and writes a second
frame after the half-written first. The main process reads the two as one and fails to unpickle them
("Unrecoverable error: UnicodeDecodeError" in ``asynpool._recv_message``): the worker is gone. A 30-minute
chaos run (seed 11) lost a worker this way 6 times.

Here the soft limit's signal is held off while a frame is written; one that came meanwhile is dropped, as its
task is over. And a process killed before the worker's consumer first runs does not end the worker
(``TaskPool.did_start_ok``). ``worker_pool`` (``worker/runtime/app.py``) names this pool; ``-P prefork`` would
bypass it.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

from celery.concurrency import asynpool, prefork

__all__ = ["TaskPool", "whole_frames"]

#: The soft time limit's signal (billiard's SIG_SOFT_TIMEOUT); None where the platform has none.
SOFT_TIMEOUT = getattr(signal, "SIGUSR1", None)


def whole_frames(put: Callable[[Any], None]) -> Callable[[Any], None]:
    """``put``, with the soft time limit's signal blocked while it writes; one that arrived meanwhile is
    taken off (its task has ended) rather than raised half way through the next frame."""
    if SOFT_TIMEOUT is None or not hasattr(signal, "sigtimedwait"):
        return put
    held = {SOFT_TIMEOUT}

    def put_whole(obj: Any) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            put(obj)
        finally:
            while signal.sigtimedwait(held, 0) is not None:
                pass
            signal.pthread_sigmask(signal.SIG_UNBLOCK, held)

    return put_whole


class _Worker(asynpool.Worker):
    """A pool process whose result queue writes whole frames (``whole_frames``)."""

    def on_loop_start(self, pid: int) -> None:
        self.outq.put = whole_frames(self.outq.put)  # the work loop reads outq.put after this
        super().on_loop_start(pid)


class _Pool(asynpool.AsynPool):
    Worker = _Worker


class TaskPool(prefork.TaskPool):
    """Celery's prefork pool (``-P prefork``) with ``_Worker`` processes."""

    Pool = _Pool

    def did_start_ok(self) -> bool:
        """Whether the pool's processes could start, as the worker asks once its consumer first runs, which is
        late when the broker is down at start. Celery's answer is no as soon as one has exited: a process killed
        meanwhile (kill -9, the OOM killer) ended the worker (chaos seed 11: "Could not start worker
        processes"). Only a process that exited by itself with an error failed to start; a killed one is
        replaced as usual."""
        return not any((process.exitcode or 0) > 0 for process in self._pool._pool)
