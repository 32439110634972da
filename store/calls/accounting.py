"""What model calls cost and how they went: counters per model entry, and calls and tokens per task, model and user.

``CallStats`` counts calls, retries, failovers and cache hits per ``[models.NAME]``
entry for a process's metrics. ``record`` counts every provider call where it
happens (an app process, or a worker, whose pool processes write multiprocess
files its metrics port serves) as Prometheus counters; ``attributed_to(user)``
names the caller of the calls made inside the block, for budgets; calls outside
one count under user "". ``observe_try`` times every try of an entry, and counts
the failed ones by kind, where the failover engine makes it.

Prometheus names: ``vectorsync_model_calls_total`` and ``vectorsync_model_tokens_total``
{task, model, user}; ``vectorsync_model_cost_total`` {task, model}, counted only for models that declare
``price_per_million_tokens`` (in that price's currency); where ``model`` is the model's name at its API (what a
provider bills) and ``user`` one of the first ``MAX_USER_LABELS`` users a process
saw, the rest counted as "other"; ``vectorsync_model_call_seconds`` {task, model} and
``vectorsync_model_errors_total`` {task, model, kind}, where ``model`` is the
``[models.NAME]`` entry (two entries may serve one model at two endpoints), as on
the worker's ``vectorsync_provider_*`` counters.
"""

from __future__ import annotations

import contextvars
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from store.errors import ConfigError, InputError, PermanentError, TransientError

__all__ = [
    "CALL_SECONDS_BUCKETS",
    "ERROR_KINDS",
    "MAX_USER_LABELS",
    "OTHER_USERS",
    "CallStats",
    "EmbeddingStats",
    "attributed_to",
    "call_counters",
    "cost_counter",
    "current_user",
    "error_kind",
    "observe_try",
    "record",
    "try_metrics",
    "user_label",
]

#: Histogram buckets of one model call, in seconds: a local model's milliseconds to a slow chat's minute.
CALL_SECONDS_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
#: Every ``kind`` label of ``vectorsync_model_errors_total``: what ``error_kind`` returns.
ERROR_KINDS = ("rate_limited", "transient", "permanent", "input", "config", "other")


@dataclass(kw_only=True)
class CallStats:
    """Counters for metrics: provider calls, retries and failovers per entry, cache hits and misses, vectors
    reused from the store.

    Keys are ``[models.NAME]`` entry names. Updated from several threads: use ``add``.
    """

    calls: Counter[str] = field(default_factory=Counter)
    retries: Counter[str] = field(default_factory=Counter)
    failovers: Counter[str] = field(default_factory=Counter)
    cache_hits: int = 0
    cache_misses: int = 0
    #: Texts whose vectors were found already stored, not bought again (``Embeddings`` with ``reuse``).
    reused: int = 0
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
_cost: list[Any] = []
_tries: tuple[Any, Any] | None = None
_lock = threading.Lock()


def call_counters() -> tuple[Any, Any]:
    """``vectorsync_model_calls`` and ``vectorsync_model_tokens``, made once in this process."""
    # Made once, under a lock: embedding batches run in parallel threads, and a counter registered twice
    # is an error of prometheus_client's.
    global _made
    with _lock:
        if _made is None:
            from prometheus_client import Counter as PromCounter

            labels = ["task", "model", "user"]
            _made = (
                PromCounter("vectorsync_model_calls", "Model provider calls", labels),
                PromCounter("vectorsync_model_tokens", "Tokens sent to and received from model providers", labels),
            )
        return _made


def cost_counter() -> Any:
    """``vectorsync_model_cost``, made once in this process."""
    with _lock:
        if not _cost:
            from prometheus_client import Counter as PromCounter

            _cost.append(
                PromCounter("vectorsync_model_cost", "Cost of model calls at their declared price", ["task", "model"])
            )
        return _cost[0]


def try_metrics() -> tuple[Any, Any]:
    """``vectorsync_model_call_seconds`` and ``vectorsync_model_errors``, made once in this process."""
    global _tries
    with _lock:
        if _tries is None:
            from prometheus_client import Counter as PromCounter
            from prometheus_client import Histogram

            _tries = (
                Histogram(
                    "vectorsync_model_call_seconds",
                    "Seconds of each try of a model entry, failed ones included",
                    ["task", "model"],
                    buckets=CALL_SECONDS_BUCKETS,
                ),
                PromCounter(
                    "vectorsync_model_errors",
                    "Failed tries of a model entry, by kind of error",
                    ["task", "model", "kind"],
                ),
            )
        return _tries


def error_kind(error: BaseException) -> str:
    """How a failed try is counted: rate_limited (429), transient, permanent, input, config or other."""
    if isinstance(error, TransientError):
        return "rate_limited" if error.rate_limited else "transient"
    for kind, types in (("permanent", PermanentError), ("input", InputError), ("config", ConfigError)):
        if isinstance(error, types):
            return kind
    return "other"


def observe_try(task: str, entry: str, seconds: float, error: BaseException | None = None) -> None:
    """Time one try of the ``[models.NAME]`` entry ``entry`` doing ``task``; count it when it raised ``error``."""
    histogram, errors = try_metrics()
    histogram.labels(task, entry).observe(seconds)
    if error is not None:
        errors.labels(task, entry, error_kind(error)).inc()


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


#: Distinct ``user`` label values one process counts under their own name; later users count as "other". The
#: names come from the app, unbounded: each would be a time series for Prometheus to keep.
MAX_USER_LABELS = 50
OTHER_USERS = "other"
_labelled: set[str] = set()
_labelled_lock = threading.Lock()


def user_label(user: str) -> str:
    """``user`` as the counters' label: itself while this process has seen fewer than ``MAX_USER_LABELS``
    users (the unattributed "" always), else ``OTHER_USERS``."""
    with _labelled_lock:
        if user in _labelled or not user:
            return user
        if len(_labelled) < MAX_USER_LABELS:
            _labelled.add(user)
            return user
    return OTHER_USERS


def record(task: str, model: str, *, tokens: int, cost: float | None = None) -> None:
    """Count one call of ``model`` doing ``task`` (embed, rerank, chat), its tokens, and its cost when the model
    declares a price."""
    calls, spent = call_counters()
    labels = (task, model, user_label(_user.get()))
    calls.labels(*labels).inc()
    if tokens:
        spent.labels(*labels).inc(tokens)
    if cost is not None:
        cost_counter().labels(task, model).inc(cost)
