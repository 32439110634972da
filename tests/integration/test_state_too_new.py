"""A state database that a newer vectorsync upgraded is refused, naming both versions and the fix: by the
ledger, the registry, a worker's start (the real ``celery worker`` exits) and ``vectorsync init``; which
otherwise upgrades and says from which version."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from store.connect.postgres import safe_url
from store.errors import ConfigError, SchemaTooNew
from store.settings import Settings
from store.state import migrations
from store.state.database import StateDatabase
from store.state.generations.postgres import PostgresGenerations
from store.state.ledger.postgres import PostgresLedger
from tests.integration.state_db import execute, fresh_database, load_schema, stamp
from tests.settings_files import worker_sections
from tests.workers import ROOT, process_env, run_cli
from worker.runtime.app import start_state


@pytest.fixture
def database(postgres_url: str) -> Iterator[str]:
    with fresh_database(postgres_url) as url:
        yield url


@pytest.fixture
def too_new(database: str) -> str:
    """A database at revision 0099, which this vectorsync does not ship; its URL carries a password."""
    StateDatabase.open(database).close()
    stamp(database, "0099")
    return sa.engine.make_url(database).set(password="s3cret").render_as_string(hide_password=False)


def refusal(url: str) -> str:
    return (
        f"the state database at {safe_url(url)} is at schema version 0099, newer than this vectorsync "
        f"knows ({migrations.HEAD}): upgrade vectorsync on this machine"
    )


def test_the_ledger_and_the_registry_refuse_a_newer_schema(too_new: str) -> None:
    assert "s3cret" not in refusal(too_new) and "***" in refusal(too_new)
    for opening in (PostgresLedger, PostgresGenerations):
        with pytest.raises(SchemaTooNew) as caught:
            opening(too_new)
        assert str(caught.value) == refusal(too_new)
        assert isinstance(caught.value, ConfigError)
    assert execute(too_new, f"SELECT version_num FROM {migrations.VERSION_TABLE}") == [("0099",)]  # untouched


def test_a_worker_s_start_refuses_a_newer_schema(too_new: str, redis_url: str, tmp_path: Path) -> None:
    with pytest.raises(SchemaTooNew) as caught:
        start_state(Settings(state={"url": too_new}))
    assert str(caught.value) == refusal(too_new)
    config = tmp_path / "vectorsync.toml"
    config.write_text(worker_sections(broker=redis_url, database=too_new, dimensions=8))
    worker = subprocess.run(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "worker",
            "worker",
            "--loglevel",
            "INFO",
            "-c",
            "1",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env=process_env(config),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert worker.returncode == 1
    assert f"vectorsync worker refused to start: {refusal(too_new)}" in worker.stderr
    assert "ready." not in worker.stdout + worker.stderr


def test_init_upgrades_and_says_from_which_version_then_refuses_a_newer_one(
    database: str, redis_url: str, tmp_path: Path
) -> None:
    load_schema(database, "first")
    config = tmp_path / "vectorsync.toml"
    config.write_text(worker_sections(broker=redis_url, database=database, dimensions=8))
    first = run_cli(config, "init")
    assert first.returncode == 0, first.stderr
    assert (
        f"state tables ready in {safe_url(database)} (schema version {migrations.HEAD}, upgraded from no "
        "version)" in first.stdout
    )
    again = run_cli(config, "init")
    assert f"state tables ready in {safe_url(database)} (schema version {migrations.HEAD})" in again.stdout
    stamp(database, "0099")
    refused = run_cli(config, "init")
    assert refused.returncode == 2
    assert refused.stderr.strip() == f"error: {refusal(database)}"
