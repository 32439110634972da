"""The services of ``vectorsync dev``: a Redis of its own that answers on a free port and goes with it, and
embedded PostgreSQL servers started together on a new machine, whose system user is made once.

A clean-clone CI run on a new machine had four xdist workers each run the wheel's ``useradd``; one entry
overwrote another, and one worker's initdb failed ("could not look up effective user ID 1002"), erroring
152 tests. Made under a lock, the user is made once, whoever asks at the same time.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import uuid
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from producer.cli.dev.processes import Processes
from producer.cli.dev.services import embedded_postgres_user, redis_answers, start_redis


def test_a_redis_of_its_own_answers_on_a_free_port_and_keeps_nothing(tmp_path: Path) -> None:
    processes = Processes(tmp_path / "logs")
    try:
        url, service, origin = start_redis(processes, tmp_path / "redis")
        assert url.startswith("redis://127.0.0.1:") and origin.startswith("redis-server from")
        assert redis_answers(url) and service.running()
    finally:
        processes.stop_all()
    assert not redis_answers(url) and list((tmp_path / "redis").iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="only root makes the wheel's system user (else none)")
def test_eight_processes_asking_at_once_make_the_user_once() -> None:
    name = f"vs_{uuid.uuid4().hex[:12]}"
    try:
        with ProcessPoolExecutor(8) as pool:
            list(pool.map(embedded_postgres_user, [name] * 8))  # each raised CalledProcessError without the lock
        entries = [entry for entry in pwd.getpwall() if entry.pw_name == name]
        assert len(entries) == 1
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)
