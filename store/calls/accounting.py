"""What model calls cost and how they went: counters per model entry, and calls and tokens per task, model and user.

``CallStats`` counts calls, retries, failovers and cache hits per ``[models.NAME]``
entry for a process's metrics. ``record`` counts every provider call where it
happens (an app process, or a worker, whose pool processes write multiprocess
files its metrics port serves) as Prometheus counters; ``attributed_to(user)``
names the caller of the calls made inside the block, for budgets; calls outside
one count under user "".
"""

from __future__ import annotations

import contextvars
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CallStats", "EmbeddingStats", "attributed_to", "current_user", "record"]


@dataclass(kw_only=True)
class CallStats:
    """Counters for metrics: provider calls, retries and failovers per entry, cache hits and misses.

    Keys are ``[models.NAME]`` entry names. Updated from several threads: use ``add``.
    """

    calls: Counter[str] = field(default_factory=Counter)
    retries: Counter[str] = field(default_factory=Counter)
    failovers: Counter[str] = field(default_factory=Counter)
    cache_hits: int = 0
    cache_misses: int = 0
    #: Called after every ``add`` with (counter, key, amount): how metrics exporters follow along.
    listener: Callable[[str, str | None, int], None] | None = field(default=None, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, counter: str, key: str | None = None, amount: int = 1) -> None:
        """Add ``amount`` to ``counter`` (for a per-entry counter, under ``key``)."""
        with self._lock:
            if key is None:
                setattr(self, counter, getattr(self, counter) + amount)
            else:
                getattr(self, counter)[key] += amount
        if self.listener is not None:
            self.listener(counter, key, amount)


#: The first name of CallStats, from when embeddings were the only model calls.
EmbeddingStats = CallStats


# -- calls and tokens per task, model and user --

_user: contextvars.ContextVar[str] = contextvars.ContextVar("vectorsync_user", default="")


_made: tuple[Any, Any] | None = None
_lock = threading.Lock()


def _counters() -> tuple[Any, Any]:
    # Made once, under a lock: embedding batches run in parallel threads, and a counter registered twice
    # is an error of prometheus_client's.
    global _made
    with _lock:
        if _made is None:
            from prometheus_client import Counter as PromCounter

            labels = ["task", "model", "user"]
            _made = (PromCounter("vectorsync_model_calls", "Model provider calls", labels),
                     PromCounter("vectorsync_model_tokens", "Tokens sent to and received from model providers", labels))
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
