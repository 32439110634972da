"""Counters of model calls, for metrics: calls, retries and failovers per entry; embedding cache hits."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["CallStats", "EmbeddingStats"]


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
