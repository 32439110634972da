"""Freshness samples kept for ``vectorsync status`` (store.broker.freshness_log), on a real Redis: the last hour's
p50 and p95 per collection, older samples left out, at most ``KEPT`` per collection, and a Redis that is down
costs the samples, never the batch that took them."""

from __future__ import annotations

import logging
import time
import uuid

import pytest

from store.broker.freshness_log import KEPT, Freshness, FreshnessLog, quantile
from store.contract import FRESHNESS_KEY_PREFIX
from tests.services import free_port


@pytest.fixture
def kept(redis_url: str) -> FreshnessLog:
    return FreshnessLog(redis_url)


def test_the_last_hours_samples_give_the_median_and_the_95th_percentile(kept: FreshnessLog) -> None:
    name = f"fresh_{uuid.uuid4().hex[:8]}"
    kept.add(name, [float(s) for s in range(1, 101)])  # 1 .. 100 seconds
    kept.add(name, [900.0] * 50, at=time.time() - 2 * 3600)  # two hours ago: outside the window
    found = kept.recent(name)
    assert found == Freshness(name, 100, pytest.approx(50.5), pytest.approx(95.05))
    other = f"none_{uuid.uuid4().hex[:8]}"
    assert kept.recent(other) == Freshness(other, 0, None, None)


def test_only_the_newest_samples_are_kept(kept: FreshnessLog) -> None:
    name = f"fresh_{uuid.uuid4().hex[:8]}"
    kept.add(name, [1000.0] * 10)
    kept.add(name, [1.0] * KEPT)
    assert kept.client.llen(FRESHNESS_KEY_PREFIX + name) == KEPT
    assert kept.recent(name).p95 == 1.0  # the ten oldest, slow ones are gone
    assert kept.client.ttl(FRESHNESS_KEY_PREFIX + name) > 3600


def test_quantiles_interpolate_between_samples() -> None:
    assert quantile([], 0.5) is None
    assert quantile([3.0], 0.95) == 3.0
    assert quantile([1.0, 2.0], 0.5) == 1.5


def test_a_redis_that_is_down_loses_the_samples_not_the_batch(caplog: pytest.LogCaptureFixture) -> None:
    down = FreshnessLog(f"redis://127.0.0.1:{free_port()}/0")
    with caplog.at_level(logging.WARNING, logger="store.broker.freshness_log"):
        down.add("notes", [1.0, 2.0])
        down.add("notes", [3.0])  # paused: not asked again, nor logged
    assert "could not keep 2 freshness samples of notes" in caplog.text
    assert "samples of notes" in caplog.text and caplog.text.count("could not keep") == 1
    assert not FreshnessLog(None).kept and FreshnessLog(None).recent("notes") == Freshness("notes", 0, None, None)
