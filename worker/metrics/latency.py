"""Freshness, measured where a change becomes searchable: the seconds from the change to the batch's commit.

A captured change is measured from its outbox row's time (``CHANGED_AT_HEADER``, set by the relay), an app's
enqueue from its send (``SENT_AT_HEADER``). Only records a batch indexed or deleted count: a skipped one was
already current, and a run's batches (reindexes, sweeps) carry no change of their own. Each sample goes to
``vectorsync_freshness_seconds{collection, path}`` and to the collection's kept samples that ``vectorsync status``
summarises (``store.broker.freshness_log``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from store.contract import CHANGED_AT_HEADER, SENT_AT_HEADER

if TYPE_CHECKING:
    from worker.metrics.series import Outcome

__all__ = ["Kept", "observe_freshness", "since"]


class Kept(Protocol):
    """Where samples are kept for ``vectorsync status``: ``store.broker.freshness_log.FreshnessLog`` is one."""

    def add(self, collection: str, seconds: Sequence[float], *, at: float | None = None) -> None: ...


def since(request: Any) -> tuple[str, float] | None:
    """The path (``capture`` or ``app``) and start of the change a task's message carries; None without one."""
    changed = request.get(CHANGED_AT_HEADER)
    if isinstance(changed, int | float):
        return "capture", float(changed)
    sent = request.get(SENT_AT_HEADER)
    return ("app", float(sent)) if isinstance(sent, int | float) else None


def observe_freshness(
    collection: str, request: Any, result: Outcome, *, kept: Kept | None, now: float | None = None
) -> int:
    """Observe the freshness of each record ``result`` made searchable; how many were observed."""
    from worker.metrics.series import freshness_histogram

    start = since(request)
    made = len(result.indexed) + len(result.deleted)
    if start is None or not made:
        return 0
    path, at = start
    seconds = max((time.time() if now is None else now) - at, 0.0)
    histogram = freshness_histogram().labels(collection, path)
    for _ in range(made):
        histogram.observe(seconds)
    if kept is not None:
        kept.add(collection, [seconds] * made)
    return made
