"""The sample rows of ``vectorsync dev`` loaded again on the same data: the rows the demo owns come back (missing, or
as the demo itself left them), a row someone changed or added is kept, and the run says which is which."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from producer.cli.dev.corpus import CRM_NOTES, CRM_TABLE, TOPICS_TABLE, crm_rows, topic_rows
from producer.cli.dev.samples import Loaded, digest, load_corpus, own

MINE = "Called Northwind myself: they want the five-year term."


@pytest.fixture
def database(tmp_path: Path) -> Iterator[tuple[str, sa.Engine]]:
    url = f"sqlite:///{tmp_path / 'corpus.db'}"
    engine = sa.create_engine(url)
    try:
        yield url, engine
    finally:
        engine.dispose()


def _bodies(engine: sa.Engine) -> dict[int, str]:
    with engine.connect() as conn:
        return {r.id: r.body for r in conn.execute(sa.text(f"SELECT id, body FROM {CRM_TABLE}"))}


def test_a_first_load_fills_both_tables_and_a_second_changes_nothing(database: tuple[str, sa.Engine]) -> None:
    url, engine = database
    counts = {TOPICS_TABLE: len(topic_rows()), CRM_TABLE: len(crm_rows())}
    assert load_corpus(url) == Loaded(counts=counts)
    with engine.connect() as conn:
        stamps = conn.execute(sa.text(f"SELECT id, updated_at FROM {CRM_TABLE}")).all()
        body = conn.execute(sa.text(f"SELECT body FROM {TOPICS_TABLE} WHERE topic = 'try'")).scalar()
    assert isinstance(body, str) and "try" in body
    assert load_corpus(url) == Loaded(counts=counts)
    with engine.connect() as conn:
        assert conn.execute(sa.text(f"SELECT id, updated_at FROM {CRM_TABLE}")).all() == stamps  # nothing rewritten


def test_a_second_load_keeps_a_users_change_and_puts_back_what_the_demo_owns(database: tuple[str, sa.Engine]) -> None:
    url, engine = database
    load_corpus(url)
    with engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE {CRM_TABLE} SET body = :body WHERE id = 5"), {"body": MINE})  # psql, say
        conn.execute(sa.text(f"DELETE FROM {CRM_TABLE} WHERE id = 7"))
        conn.execute(sa.text(f"UPDATE {CRM_TABLE} SET body = 'the demo wrote this' WHERE id = 2"))
        own(conn, CRM_TABLE, "2")  # the demo's own change capture UPDATE
        conn.execute(
            sa.text(
                f"INSERT INTO {CRM_TABLE} (id, title, body, kind, owner, created_at) VALUES (99, 't', 'b', 'call', "
                "'Me', '2026-12-01 00:00:00')"
            )
        )
    loaded = load_corpus(url)
    assert loaded.restored == {CRM_TABLE: ["2", "7"]} and loaded.kept == {CRM_TABLE: ["5"]}
    bodies = _bodies(engine)
    assert bodies[5] == MINE and bodies[99] == "b"
    assert bodies[2] == CRM_NOTES[1][4] and bodies[7] == CRM_NOTES[6][4]
    again = load_corpus(url)  # what it kept stays kept, and is said again
    assert again.restored == {} and again.kept == {CRM_TABLE: ["5"]} and _bodies(engine)[5] == MINE


def test_digest_reads_a_datetime_in_utc_and_a_naive_one_as_utc() -> None:
    aware = {"at": dt.datetime(2026, 8, 4, 11, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)))}
    naive = {"at": dt.datetime(2026, 8, 4, 9, 30)}
    assert digest(aware, ["at"]) == digest(naive, ["at"]) != digest({"at": dt.datetime(2026, 8, 4, 9, 31)}, ["at"])
