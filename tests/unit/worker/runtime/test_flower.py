"""Flower's thread pool (worker/runtime/flower.py): it runs calls like ThreadPoolExecutor, and an exit never waits
for it.

A process that exits with a call in flight, and Flower itself stopped with Ctrl-C while its inspect calls are in
flight: tests/integration/worker/test_flower.py.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from worker.runtime.flower import DaemonThreadPool


def test_it_runs_calls_and_hands_back_results_and_errors() -> None:
    pool = DaemonThreadPool(max_workers=2)
    try:
        assert [f.result(timeout=5) for f in [pool.submit(pow, 2, n) for n in range(6)]] == [1, 2, 4, 8, 16, 32]
        failed = pool.submit(int, "x")
        with pytest.raises(ValueError, match="invalid literal"):
            failed.result(timeout=5)
        assert len(pool._daemons) <= 2 and all(t.daemon for t in pool._daemons)
    finally:
        pool.shutdown()


def test_asyncio_takes_it_as_a_loops_default_executor() -> None:
    pool = DaemonThreadPool()
    loop = asyncio.new_event_loop()
    try:
        loop.set_default_executor(pool)  # Flower's app does this; asyncio accepts only a ThreadPoolExecutor
        assert loop.run_until_complete(loop.run_in_executor(None, sum, [1, 2, 3])) == 6
    finally:
        loop.close()
        pool.shutdown()


def test_shutdown_cancels_what_is_queued_and_refuses_new_calls() -> None:
    pool = DaemonThreadPool(max_workers=1)
    release = threading.Event()
    busy = pool.submit(release.wait, 5)
    queued = pool.submit(time.sleep, 0)
    pool.shutdown(wait=False)
    assert queued.cancelled()
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(time.sleep, 0)
    release.set()
    assert busy.result(timeout=5) is True
