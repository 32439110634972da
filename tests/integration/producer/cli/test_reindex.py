"""``vectorsync reindex --wait`` (producer/cli/reindex.py) against a real broker with no worker: it stops
following after ``--timeout`` and says how to follow the run, exit 3."""

from __future__ import annotations

from pathlib import Path

import redis

from tests.workers import run_cli


def test_reindex_wait_gives_up_after_its_timeout_when_no_worker_runs(
    tmp_path: Path, broker_redis_url: str, postgres_url: str
) -> None:
    config = tmp_path / "vectorsync.toml"
    config.write_text(
        f'[broker]\nurl = "{broker_redis_url}"\n[vectors]\nurl = "{postgres_url}"\n'
        '[collections.notes.source]\nkind = "python"\n'
        'loader = "tests.unit.worker.test_pipeline:load_records"\n'
    )
    result = run_cli(config, "reindex", "notes", "--wait", "--timeout", "1")
    assert result.returncode == 3
    assert "is still running; follow it with `vectorsync status" in result.stderr
    redis.Redis.from_url(broker_redis_url).flushdb()
