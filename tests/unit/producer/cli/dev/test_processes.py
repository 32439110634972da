"""``vectorsync dev`` knows every process it started, whenever its stop signal lands."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from producer.cli.dev import processes as module
from producer.cli.dev.processes import Processes


class _Stop(Exception):
    pass


@pytest.fixture
def stop_raises() -> Iterator[None]:
    def raise_stop(signum: int, frame: Any) -> None:
        raise _Stop()

    previous = signal.signal(signal.SIGTERM, raise_stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_stop_signal_during_a_start_comes_after_the_service_is_known(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop_raises: None
) -> None:
    real = subprocess.Popen

    def popen_then_stop(*args: Any, **kwargs: Any) -> Any:
        started = real(*args, **kwargs)
        signal.raise_signal(signal.SIGTERM)  # the stop lands between the spawn and the bookkeeping
        return started

    monkeypatch.setattr(module.subprocess, "Popen", popen_then_stop)
    processes = Processes(tmp_path)
    with pytest.raises(_Stop):
        processes.start("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"])
    [sleeper] = processes.services  # known, so the stop that follows stops it
    processes.stop_all()
    assert sleeper.process.returncode == -signal.SIGTERM  # it took SIGTERM: the child does not inherit the hold
