"""What model calls cost: calls and tokens per task, model and user, as Prometheus counters.

Every provider call is counted where it happens (an app process, or a worker,
whose pool processes write multiprocess files its metrics port serves).
``attributed_to(user)`` names the caller of the calls made inside the block,
for budgets; calls outside one count under user "".
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["attributed_to", "current_user", "record"]

_user: contextvars.ContextVar[str] = contextvars.ContextVar("vectorsync_user", default="")


_made: tuple[Any, Any] | None = None
_lock = threading.Lock()


def _counters() -> tuple[Any, Any]:
    # Made once, under a lock: embedding batches run in parallel threads, and a counter registered twice
    # is an error of prometheus_client's.
    global _made
    with _lock:
        if _made is None:
            from prometheus_client import Counter

            labels = ["task", "model", "user"]
            _made = (Counter("vectorsync_model_calls", "Model provider calls", labels),
                     Counter("vectorsync_model_tokens", "Tokens sent to and received from model providers", labels))
        return _made


@contextmanager
def attributed_to(user: str | None) -> Iterator[None]:
    """Count the model calls made inside the block under ``user``."""
    token = _user.set(user or "")
    try:
        yield
    finally:
        _user.reset(token)


def current_user() -> str:
    return _user.get()


def record(task: str, model: str, *, tokens: int) -> None:
    """Count one call of ``model`` doing ``task`` (embed, rerank, chat) and its tokens."""
    calls, spent = _counters()
    labels = (task, model, _user.get())
    calls.labels(*labels).inc()
    if tokens:
        spent.labels(*labels).inc(tokens)
