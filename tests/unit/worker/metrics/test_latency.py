"""Freshness as a worker measures it (worker/metrics/latency.py): from the change's time in the message's headers to
now, once per record a batch indexed or deleted; a message with no stamp measures nothing.

Through a real worker, after captured writes and an app's send: tests/integration/worker/test_verified.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from celery.app.task import Context
from prometheus_client import REGISTRY

from store.contract import CHANGED_AT_HEADER, SENT_AT_HEADER
from worker.metrics.latency import observe_freshness, since
from worker.pipeline.batch import BatchResult


class Kept:
    """A FreshnessLog that remembers what it was given."""

    def __init__(self) -> None:
        self.samples: list[tuple[str, list[float]]] = []

    def add(self, collection: str, seconds: Sequence[float], *, at: float | None = None) -> None:
        self.samples.append((collection, list(seconds)))


def count(collection: str, path: str) -> float:
    found = REGISTRY.get_sample_value("vectorsync_freshness_seconds_count", {"collection": collection, "path": path})
    return found or 0.0


def test_a_captured_change_is_timed_from_its_write_an_app_send_from_its_send() -> None:
    assert since(Context({CHANGED_AT_HEADER: 100.0, SENT_AT_HEADER: 105.0})) == ("capture", 100.0)
    assert since(Context({SENT_AT_HEADER: 105})) == ("app", 105.0)
    assert since(Context({})) is None
    assert since(Context({SENT_AT_HEADER: "yesterday"})) is None  # not a stamp of ours: nothing measured


def test_each_record_made_searchable_is_observed_once_the_unchanged_and_failed_are_not() -> None:
    kept = Kept()
    result = BatchResult(indexed=["1", "2"], deleted=["3"], skipped=["4"], failed={"5": "bad"})
    before = count("fresh_notes", "capture")
    made = observe_freshness("fresh_notes", Context({CHANGED_AT_HEADER: 100.0}), result, kept=kept, now=101.5)
    assert made == 3
    assert count("fresh_notes", "capture") == before + 3
    assert kept.samples == [("fresh_notes", [1.5, 1.5, 1.5])]


def test_a_clock_behind_the_writers_never_makes_a_negative_time_and_no_stamp_observes_nothing() -> None:
    kept = Kept()
    result = BatchResult(indexed=["1"])
    observe_freshness("fresh_docs", Context({SENT_AT_HEADER: 200.0}), result, kept=kept, now=199.0)
    assert kept.samples == [("fresh_docs", [0.0])]
    assert observe_freshness("fresh_docs", Context({}), result, kept=kept) == 0
    assert observe_freshness("fresh_docs", Context({SENT_AT_HEADER: 1.0}), BatchResult(skipped=["1"]), kept=kept) == 0
    assert len(kept.samples) == 1
