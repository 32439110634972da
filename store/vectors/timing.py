"""How long searches take, in whichever process searches (an app, the CLI, a worker): a Prometheus histogram.

``vectorsync_search_seconds{collection}`` times ``Collection.search`` whole: the checks, the query's
embedding when it is a text (its model call is also in ``vectorsync_model_call_seconds``), and the
backend's search. The pgvector planner counts the path each filtered search took
(``vectorsync_search_plans_total``, ``store/vectors/pgvector/planner.py``).
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["SEARCH_SECONDS_BUCKETS", "observe_search", "search_histogram"]

#: Histogram buckets of one search, in seconds.
SEARCH_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

_histogram: Any = None
_lock = threading.Lock()


def search_histogram() -> Any:
    """``vectorsync_search_seconds``, made once in this process."""
    global _histogram
    with _lock:  # searches run in threads; a metric registered twice is an error of prometheus_client's
        if _histogram is None:
            from prometheus_client import Histogram

            _histogram = Histogram(
                "vectorsync_search_seconds",
                "Seconds of each search of a collection, its query's embedding included",
                ["collection"],
                buckets=SEARCH_SECONDS_BUCKETS,
            )
        return _histogram


def observe_search(collection: str, seconds: float) -> None:
    """Count one search of ``collection`` that took ``seconds``."""
    search_histogram().labels(collection).observe(seconds)
