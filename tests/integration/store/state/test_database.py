"""Opening and upgrading the state database: fresh, twice, at once from several processes (one upgrades, the
others find it done), without the lock once current, and beside an application's own Alembic history (the
schemas of older releases adopted: migrations/versions/test_0001_state_tables.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from store.connect.postgres import advisory_lock, engine_url, safe_url
from store.state import migrations
from store.state.database import STATE_LOCK, StateDatabase, Upgrade
from store.state.ledger.postgres import PostgresLedger
from tests.integration.state_db import execute, fill_first_release, fresh_database, load_schema, version


@pytest.fixture
def database(postgres_url: str) -> Iterator[str]:
    with fresh_database(postgres_url) as url:
        yield url


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
        "vectorsync_lane_texts",
        "vectorsync_lane_jobs",
        "vectorsync_lane_waiting",
        "vectorsync_lane_looks",
        "vectorsync_lane_tally",
        migrations.VERSION_TABLE,
    }


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
