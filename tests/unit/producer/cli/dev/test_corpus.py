"""The sample corpus of ``vectorsync dev``: Python's help topics and CRM notes, loaded into the same tables twice
(the real thing, started and stopped with Ctrl-C: tests/integration/producer/cli/dev/test_harness.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import sqlalchemy as sa

from producer.cli.dev.corpus import CRM_TABLE, TOPICS_TABLE, crm_rows, length_bucket, load_corpus, topic_rows


def test_topic_rows_are_pythons_help_topics() -> None:
    rows = topic_rows()
    topics = [row["topic"] for row in rows]
    assert len(rows) >= 50 and len(set(topics)) == len(topics)
    assert {"try", "exceptions", "raise"} <= set(topics)
    assert {row["kind"] for row in rows} == {"python-topic"}
    assert {row["length"] for row in rows} <= {"short", "medium", "long"}
    assert all(row["body"].strip() for row in rows)


def test_length_bucket() -> None:
    assert [length_bucket("x" * n) for n in (0, 999, 1000, 4999, 5000)] == [
        "short",
        "short",
        "medium",
        "medium",
        "long",
    ]


def test_crm_rows() -> None:
    rows = crm_rows()
    assert 25 <= len(rows) <= 40
    assert [row["id"] for row in rows] == list(range(1, len(rows) + 1))
    assert {row["kind"] for row in rows} == {"call", "email", "meeting"}
    assert all(row["created_at"].utcoffset() == dt.timedelta(0) for row in rows)
    assert any(row["created_at"] >= dt.datetime(2026, 10, 1, tzinfo=dt.UTC) for row in rows)
    assert any(row["created_at"] < dt.datetime(2026, 10, 1, tzinfo=dt.UTC) for row in rows)
    assert len({row["owner"] for row in rows}) >= 3


def test_load_corpus_twice_gives_the_same_tables(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'corpus.db'}"
    first = load_corpus(url)
    second = load_corpus(url)
    assert first == second == {TOPICS_TABLE: len(topic_rows()), CRM_TABLE: len(crm_rows())}
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text(f"SELECT count(*) FROM {CRM_TABLE}")).scalar() == len(crm_rows())
            body = conn.execute(sa.text(f"SELECT body FROM {TOPICS_TABLE} WHERE topic = 'try'")).scalar()
    finally:
        engine.dispose()
    assert isinstance(body, str) and "try" in body
