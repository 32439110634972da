"""How many threads a model run in this process (torch, ONNX Runtime) may use.

torch and ONNX Runtime each start one thread per core by default. A Celery
worker with a prefork pool of N processes then runs N thread pools of one
thread per core each, and the cores are oversubscribed: threads wait on each
other instead of computing. The budget shares the cores out instead: cores //
processes, at least 1, unless ``[models.NAME] threads`` says otherwise.

The worker says how many processes share the cores through
``$VECTORSYNC_LOCAL_PROCESSES``, set from its pool size when it starts
(``worker.runtime.app``); an operator who runs several workers on one machine, or
``vectorsync dev``, sets it to the total.
"""

from __future__ import annotations

import logging
import os

__all__ = ["PROCESSES_ENV", "available_cores", "budget_here", "local_processes", "thread_budget"]

log = logging.getLogger(__name__)

#: Processes on this machine that run local models and share its cores (unset: 1, this one alone).
PROCESSES_ENV = "VECTORSYNC_LOCAL_PROCESSES"


def thread_budget(cores: int, processes: int, override: int | None = None) -> int:
    """Threads for one process: ``override`` when set, else ``cores // processes``; never below 1."""
    if override is not None:
        return max(1, override)
    return max(1, cores // max(1, processes))


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, which containers narrow), else the machine's."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def local_processes() -> int:
    """How many processes share the cores: ``$VECTORSYNC_LOCAL_PROCESSES``, else 1 (a bad value counts as 1)."""
    raw = os.environ.get(PROCESSES_ENV, "").strip()
    if not raw:
        return 1
    try:
        return max(1, int(raw))
    except ValueError:
        log.warning("%s=%r is not a whole number: taken as 1", PROCESSES_ENV, raw)
        return 1


def budget_here(override: int | None = None) -> int:
    """The thread budget of this process: its cores shared among ``local_processes()``, or ``override``."""
    return thread_budget(available_cores(), local_processes(), override)
