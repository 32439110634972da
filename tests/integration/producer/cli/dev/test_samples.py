"""The demo's sample rows on a real PostgreSQL, as a second ``vectorsync dev`` finds them: a note someone changed
with psql, and a row someone added, are kept; a sample row deleted, and one the demo itself last wrote, are put
back; a run with nothing changed puts back nothing (the rules, on SQLite: tests/unit/producer/cli/dev/)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from producer.cli.dev.corpus import CRM_TABLE, crm_rows
from producer.cli.dev.samples import load_corpus, own
from store.connect.postgres import make_engine
from tests.integration.state_db import fresh_database


@pytest.fixture
def database(postgres_url: str) -> Iterator[str]:
    with fresh_database(postgres_url) as url:
        yield url


def _connect(url: str) -> psycopg.Connection[tuple[Any, ...]]:
    """A plain psycopg connection, as psql would make one (not through vectorsync)."""
    return psycopg.connect(sa.engine.make_url(url).set(drivername="postgresql").render_as_string(False))


def _bodies(url: str) -> dict[int, str]:
    with _connect(url) as conn:
        return dict(conn.execute(f"SELECT id, body FROM {CRM_TABLE}").fetchall())


def _run(url: str, statement: str) -> None:
    with _connect(url) as conn:
        conn.execute(statement)


def test_a_second_run_keeps_what_a_user_changed_and_puts_back_only_the_demos_rows(database: str) -> None:
    first = load_corpus(database)
    samples = {row["id"]: row["body"] for row in crm_rows()}
    assert first.counts[CRM_TABLE] == len(samples) and first.restored == {} and first.kept == {}
    assert _bodies(database) == samples

    again = load_corpus(database)  # nothing changed: nothing to put back
    assert (again.restored, again.kept) == ({}, {})

    _run(database, f"UPDATE {CRM_TABLE} SET body = 'my own note' WHERE id = 3")  # a user's psql edit
    _run(database, f"DELETE FROM {CRM_TABLE} WHERE id = 4")  # a sample row gone
    _run(
        database,
        f"INSERT INTO {CRM_TABLE} (id, title, body, kind, owner, created_at) "
        "VALUES (999, 'mine', 'a row of my own', 'call', 'me', now())",
    )
    engine = make_engine(database, setting="the demo database")
    try:
        with engine.begin() as conn:  # the demo's own UPDATE of note 5, recorded as the demo's
            conn.execute(sa.text(f"UPDATE {CRM_TABLE} SET body = 'the demo moved it' WHERE id = 5"))
            own(conn, CRM_TABLE, "5")
    finally:
        engine.dispose()

    third = load_corpus(database)
    assert third.kept == {CRM_TABLE: ["3"]}
    assert sorted(third.restored[CRM_TABLE], key=int) == ["4", "5"]
    bodies = _bodies(database)
    assert bodies[3] == "my own note" and bodies[999] == "a row of my own"
    assert bodies[4] == samples[4] and bodies[5] == samples[5]
