"""Revision 0002 over a database at 0001 with a run: the run keeps its rows and is a synchronous one, the batch
lane's tables are made empty, and the version ends at the head."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from store.connect.postgres import engine_url
from store.state import migrations
from store.state.ledger.postgres import PostgresLedger
from tests.integration.state_db import execute, fill_main, fresh_database, load_schema, version


@pytest.fixture
def database(postgres_url: str) -> Iterator[str]:
    with fresh_database(postgres_url) as url:
        yield url


def test_a_database_at_0001_gains_the_lane_and_keeps_its_runs(database: str) -> None:
    load_schema(database, "main")
    fill_main(database)
    engine = sa.create_engine(engine_url(database), poolclass=sa.NullPool)
    try:
        with engine.begin() as conn:
            migrations.upgrade(conn, "0001")
    finally:
        engine.dispose()
    assert version(database) == ["0001"]
    ledger = PostgresLedger(database)  # what producers and workers construct: it upgrades
    try:
        assert version(database) == [migrations.HEAD] == ["0002"]
        assert ledger.run("run1").lane == "sync" and ledger.run("run1").total == 10
    finally:
        ledger.close()
    lane = ("texts", "jobs", "waiting", "looks", "tally")
    for table in (f"vectorsync_lane_{name}" for name in lane):
        assert execute(database, f"SELECT count(*) FROM {table}") == [(0,)]
