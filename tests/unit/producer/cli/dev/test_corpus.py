"""The sample corpus of ``vectorsync dev``: Python's help topics and CRM notes (loaded: test_samples.py; the real
thing, started and stopped with Ctrl-C: tests/integration/producer/cli/dev/test_harness.py)."""

from __future__ import annotations

import datetime as dt

from producer.cli.dev.corpus import crm_rows, length_bucket, topic_rows


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
