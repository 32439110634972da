"""Upgrading the state database: fresh, from today's main and from the first release, twice, and at once
from several processes; the rows already there stay, and the version ends at the head."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from store.connect.postgres import advisory_lock, engine_url, safe_url
from store.state import migrations
from store.state.database import STATE_LOCK, StateDatabase, Upgrade
from store.state.ledger import LedgerEntry, RunStatus
from store.state.ledger.postgres import PostgresLedger
from tests.integration.state_db import execute, fresh_database, load_schema

WHEN = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def database(postgres_url: str) -> Iterator[str]:
    with fresh_database(postgres_url) as url:
        yield url


def version(url: str) -> list[str]:
    return [row[0] for row in execute(url, f"SELECT version_num FROM {migrations.VERSION_TABLE}")]


def fill_first_release(url: str) -> None:
    """A row in every table the first release had, in its columns only."""
    execute(
        url,
        "INSERT INTO vectorsync_ledger (collection, record_id, content_hash, model, chunks, version, "
        "indexed_at) VALUES ('notes', 'a', 'h1', 'small', 3, 7, :when)",
        {"when": WHEN},
    )
    execute(
        url,
        'INSERT INTO vectorsync_runs (run_id, collection, status, "full", total, batches, error, '
        "started_at) VALUES ('run1', 'notes', 'running', false, 10, 2, '', :when)",
        {"when": WHEN},
    )
    execute(
        url, "INSERT INTO vectorsync_run_batches (run_id, batch, done, skipped, failed) VALUES ('run1', 0, 4, 1, 0)"
    )
    execute(
        url,
        "INSERT INTO vectorsync_failures (collection, record_id, error, attempts, run_id, last_seen) "
        "VALUES ('notes', 'b', 'boom', 2, 'run1', :when)",
        {"when": WHEN},
    )


def fill_main(url: str) -> None:
    """A row in every table today's main has, every column given."""
    execute(
        url, "INSERT INTO vectorsync_ledger VALUES ('notes', 'a', 'h1', 'small', 3, 7, 'stamp1', :when)", {"when": WHEN}
    )
    execute(
        url,
        'INSERT INTO vectorsync_runs (run_id, collection, status, kind, "full", total, batches, '
        "deferred_index, error, started_at) VALUES ('run1', 'notes', 'running', 'reconcile', true, 10, 2, "
        "true, '', :when)",
        {"when": WHEN},
    )
    execute(url, "INSERT INTO vectorsync_run_batches VALUES ('run1', 0, 4, 1, 0, :when)", {"when": WHEN})
    execute(url, "INSERT INTO vectorsync_failures VALUES ('notes', 'b', 'boom', 2, 'run1', :when)", {"when": WHEN})
    execute(url, "INSERT INTO vectorsync_aliases VALUES ('notes', 1, NULL)")
    execute(
        url,
        "INSERT INTO vectorsync_generations VALUES ('notes', 1, '[\"small\"]', '{\"small\": \"m\"}', 8, "
        "NULL, :when), ('notes', 2, '[\"large\"]', '{}', 16, 'run1', :when)",
        {"when": WHEN},
    )


def test_a_fresh_database_upgrades_to_the_head_and_again_to_nothing(database: str) -> None:
    state = StateDatabase.connect(database)
    try:
        assert state.version() is None
        assert state.upgrade() == Upgrade(safe_url(database), None, migrations.HEAD)
        assert state.upgrade() == Upgrade(safe_url(database), migrations.HEAD, migrations.HEAD)
        assert not state.upgrade().changed
    finally:
        state.close()
    assert version(database) == [migrations.HEAD]
    tables = {row[0] for row in execute(database, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert tables == {
        "vectorsync_ledger",
        "vectorsync_runs",
        "vectorsync_run_batches",
        "vectorsync_failures",
        "vectorsync_aliases",
        "vectorsync_generations",
        "vectorsync_spend",
        "vectorsync_parked_batches",
        migrations.VERSION_TABLE,
    }


def test_main_s_schema_keeps_its_rows_and_ends_at_the_head(database: str) -> None:
    load_schema(database, "main")
    fill_main(database)
    ledger = PostgresLedger(database)  # what producers and workers construct: it upgrades
    try:
        assert version(database) == [migrations.HEAD]
        assert ledger.entries("notes", ["a"]) == {"a": LedgerEntry("a", "h1", "small", 3, 7, "stamp1")}
        run = ledger.run("run1")
        assert (run.kind, run.full, run.total, run.done, run.skipped, run.status) == (
            "reconcile",
            True,
            10,
            4,
            1,
            RunStatus.RUNNING,
        )
        assert run.moved_at == WHEN
        assert [(f.record_id, f.error, f.attempts) for f in ledger.failures("notes")] == [("b", "boom", 2)]
        alias = ledger.generations.alias("notes")
        assert alias is not None and alias.live == 1
        assert [(g.number, g.chain, g.dimensions, g.run_id) for g in alias.generations] == [
            (1, ("small",), 8, None),
            (2, ("large",), 16, "run1"),
        ]
        assert ledger.run_spend("run1") == []  # 0004's table, made for a run that spent before it was counted
        assert (ledger.run("run1").max_tokens, ledger.run("run1").max_cost) == (None, None)  # 0005: no caps of its own
        # and the deferred run ends as it would have: its index is still to build
        assert ledger.finish_batch("run1", 1, done=5, skipped=0, failed=0).status == RunStatus.INDEXING
    finally:
        ledger.close()


def test_the_first_release_s_schema_gains_its_columns_with_defaults_and_keeps_its_rows(database: str) -> None:
    load_schema(database, "first")
    fill_first_release(database)
    ledger = PostgresLedger(database)
    try:
        assert version(database) == [migrations.HEAD]
        assert ledger.entries("notes", ["a"]) == {"a": LedgerEntry("a", "h1", "small", 3, 7, "")}
        run = ledger.run("run1")
        assert (run.kind, run.full, run.total, run.done, run.skipped, run.started_at) == (
            "reindex",
            False,
            10,
            4,
            1,
            WHEN,
        )
        assert run.moved_at > WHEN  # counted_at: the upgrade's now() for batches counted before it existed
        assert [(f.record_id, f.error, f.attempts) for f in ledger.failures("notes")] == [("b", "boom", 2)]
        assert ledger.finish_batch("run1", 1, done=5, skipped=0, failed=0).status == RunStatus.DONE  # not deferred
        assert ledger.generations.aliases() == []  # the generations tables are there, empty
        reconcile = ledger.create_run("notes", kind="reconcile")  # the column runs never had before 0002
        assert ledger.run(reconcile).kind == "reconcile"
    finally:
        ledger.close()


def test_a_database_at_the_head_opens_without_the_lock(database: str) -> None:
    StateDatabase.open(database).close()
    holder = sa.create_engine(engine_url(database), poolclass=sa.NullPool)
    try:
        with holder.begin() as conn:
            advisory_lock(conn, STATE_LOCK)  # as a process in the middle of an upgrade would hold it
            opened: list[PostgresLedger] = []
            thread = threading.Thread(target=lambda: opened.append(PostgresLedger(database)))
            thread.start()
            thread.join(timeout=20)
            assert opened, "opening a current state database waited for the schema lock"
            opened[0].close()
    finally:
        holder.dispose()


def test_processes_upgrading_at_once_take_turns(database: str) -> None:
    load_schema(database, "first")
    fill_first_release(database)
    barrier = threading.Barrier(4)
    done: list[Upgrade] = []
    failed: list[BaseException] = []

    def upgrade() -> None:
        state = StateDatabase.connect(database, pool_size=1)
        try:
            barrier.wait(timeout=20)
            done.append(state.upgrade())
        except BaseException as exc:
            failed.append(exc)
        finally:
            state.close()

    threads = [threading.Thread(target=upgrade) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failed == []
    assert (
        sorted((u.before or "", u.after) for u in done)
        == [("", migrations.HEAD)] + [(migrations.HEAD, migrations.HEAD)] * 3
    )  # one upgraded, three found it done
    assert version(database) == [migrations.HEAD]
    assert execute(database, "SELECT count(*) FROM vectorsync_ledger") == [(1,)]


def test_an_application_s_own_alembic_history_is_left_alone(database: str) -> None:
    execute(database, "CREATE TABLE alembic_version (version_num varchar(32) PRIMARY KEY)")
    execute(database, "INSERT INTO alembic_version VALUES ('app_rev_42')")
    StateDatabase.open(database).close()
    assert execute(database, "SELECT version_num FROM alembic_version") == [("app_rev_42",)]
    assert version(database) == [migrations.HEAD]
