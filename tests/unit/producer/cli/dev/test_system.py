"""What a run of ``vectorsync dev`` started: the workers' environment and command, a worker that exits started
again a few times and then told with its log, and the wait for the workers' answers."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from producer.cli.dev.processes import DevServiceError
from producer.cli.dev.system import (
    MAX_WORKER_RESTARTS,
    DevSystem,
    child_env,
    is_setting,
    wait_for_workers,
    worker_command,
)
from store.calls.threads import PROCESSES_ENV
from store.contract import BULK_QUEUE, LIVE_QUEUE


def test_a_setting_is_the_config_file_or_a_section_key() -> None:
    assert is_setting("VECTORSYNC_CONFIG") and is_setting("VECTORSYNC_BROKER__URL")
    assert not is_setting("VECTORSYNC_TEST_REDIS_URL") and not is_setting("PATH")


def test_the_children_read_the_dev_settings_alone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VECTORSYNC_BROKER__URL", "redis://elsewhere:6379/0")
    monkeypatch.setenv("PYTHONPATH", "/already")
    monkeypatch.delenv(PROCESSES_ENV, raising=False)
    env = child_env(tmp_path / "vectorsync.toml", Path("/checkout"), True, 3)
    assert "VECTORSYNC_BROKER__URL" not in env and env["VECTORSYNC_CONFIG"] == str(tmp_path / "vectorsync.toml")
    assert env["PYTHONPATH"].split(":") == ["/checkout", "/already"]
    assert env[PROCESSES_ENV] == "3"
    assert child_env(tmp_path / "v.toml", Path("/site"), False, 1)["PYTHONPATH"] == "/already"  # installed


def test_a_worker_is_one_process_on_both_queues_with_events() -> None:
    command = worker_command(2)
    assert command[:3] == [sys.executable, "-m", "celery"]
    assert "dev2@%h" in command and f"{LIVE_QUEUE},{BULK_QUEUE}" in command and "-E" in command


def test_a_worker_that_exits_is_started_again_then_told_with_its_log(tmp_path: Path) -> None:
    dev = DevSystem(tmp_path)
    exits = [sys.executable, "-c", "print('worker died here'); raise SystemExit(3)"]
    try:
        dev.start_worker("dev1", exits, {}, tmp_path)
        for restarted in range(1, MAX_WORKER_RESTARTS + 1):
            while dev.workers[0].running():
                time.sleep(0.02)
            dev.check_alive()
            assert dev.restarts == {"dev1": restarted} and [w.name for w in dev.workers] == ["dev1"]
        while dev.workers[0].running():
            time.sleep(0.02)
        with pytest.raises(DevServiceError, match=r"(?s)dev1 .* exited with code 3.*worker died here.*restarted 3"):
            dev.check_alive()
    finally:
        dev.stop()
    assert dev.processes.services == []


def test_the_workers_are_waited_for_until_each_answers(tmp_path: Path) -> None:
    dev = DevSystem(tmp_path)
    answers = iter([[], [{"dev1@host": {"ok": "pong"}}], [{"dev1@host": {}}, {"dev2@host": {}}]])
    producer = SimpleNamespace(app=SimpleNamespace(control=SimpleNamespace(ping=lambda timeout: next(answers))))
    assert wait_for_workers(dev, producer, 2) == ["dev1@host", "dev2@host"]
