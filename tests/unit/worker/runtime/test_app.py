"""The Celery app (``worker.runtime.app``): every task known by its name once the app imports its tasks, as a
worker starts; and how many pool processes share the cores, told to the pool before it forks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from store.calls import threads as cpu
from store.contract import (
    BUILD_INDEX,
    INDEX_BATCH,
    INDEX_DOCUMENT,
    INDEX_RECORD,
    LANE_TICK,
    RECONCILE,
    REINDEX_ALL,
    VERIFY,
)
from worker.runtime.app import _share_cores, pool_processes

ROOT = Path(__file__).resolve().parents[4]


def test_a_starting_worker_knows_every_task_by_its_name() -> None:
    """What ``celery -A worker worker`` does in a fresh process: import ``worker`` for its app, then the app's
    ``include``; each task module registers its tasks as it is imported."""
    script = (
        "import json, worker; worker.app.loader.import_default_modules(); "
        "print(json.dumps(sorted(t for t in worker.app.tasks if t.startswith('vectorsync.'))))"
    )
    found = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    names = [INDEX_RECORD, INDEX_BATCH, INDEX_DOCUMENT, REINDEX_ALL, BUILD_INDEX, RECONCILE, VERIFY, LANE_TICK]
    assert json.loads(found.stdout.splitlines()[-1]) == sorted(names)


def test_the_worker_tells_its_pool_how_many_processes_share_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    assert pool_processes(SimpleNamespace(pool_cls="prefork", concurrency=3)) == 3
    assert pool_processes(SimpleNamespace(pool_cls="threads", concurrency=8)) == 1  # one process
    assert pool_processes(SimpleNamespace(pool_cls="prefork", concurrency="auto")) is None
    monkeypatch.delenv(cpu.PROCESSES_ENV, raising=False)
    _share_cores(sender=SimpleNamespace(pool_cls="prefork", concurrency=2))
    assert cpu.local_processes() == 2
    _share_cores(sender=SimpleNamespace(pool_cls="prefork", concurrency=5))  # set by the operator: kept
    assert cpu.local_processes() == 2
