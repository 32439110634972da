"""What ``vectorsync explain`` prints from the facts: each part on its line, the chunks, the notes, the verdict
last; and the JSON form in full. (The command through its entry point: tests/integration/producer/cli.)"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from producer.cli.explain import render, to_json
from store.explain import Facts, SourceFacts
from store.state.ledger import LedgerEntry
from store.vectors.records import StoredChunk

WRITTEN = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def facts() -> Facts:
    return Facts(
        collection="notes",
        record_id="42",
        generation="notes",
        backend="pgvector",
        place="the pgvector table vs_notes",
        source=SourceFacts("sql", True, text="Renewal [b]call[/b]", stamp="2026-12-02 10:00:00", hash="a" * 64),
        entry=LedgerEntry("42", "b" * 64, "text-embedding-3-small", 1, indexed_at=WRITTEN),
        chunks=[StoredChunk("42:0", 0, "Renewal call, older", "text-embedding-3-small", WRITTEN)],
        outbox_rows=1,
        outbox_since=WRITTEN,
        queued=False,
        notes=["the ledger records when a record was written, not which run or task wrote it"],
    )


def test_render_prints_each_part_then_the_verdict_last(capsys: pytest.CaptureFixture[str]) -> None:
    render(facts())
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "notes 42 (in the pgvector table vs_notes)"
    assert lines[1] == "source   sql: found, updated 2026-12-02 10:00:00: 'Renewal [b]call[/b]'"  # literally
    assert lines[2] == f"hash     now {'a' * 12}, ledger {'b' * 12} (they differ)"
    assert lines[3] == "ledger   1 chunks, model text-embedding-3-small, version 0, written 2026-12-01 09:30:00"
    assert lines[4] == "failure  none"
    assert lines[5] == "waiting  1 outbox rows since 2026-12-01 09:30:00; queued mark not set"
    table = "\n".join(lines)
    assert "42:0" in table and "~5" in table and "2026-12-01 09:30:00" in table
    assert lines[-2] == "note: the ledger records when a record was written, not which run or task wrote it"
    assert lines[-1] == "verdict: stale: the source changed at 2026-12-02 10:00:00, a change is queued"


def test_json_holds_every_fact_in_full_and_the_verdict() -> None:
    data = json.loads(to_json(facts()))
    assert data["source"]["hash"] == "a" * 64 and data["entry"]["content_hash"] == "b" * 64
    assert data["chunks"][0] | {"tokens": 5} == data["chunks"][0]
    assert data["entry"]["indexed_at"] == "2026-12-01 09:30:00+00:00"
    assert data["verdict"] == {
        "state": "stale",
        "line": "stale: the source changed at 2026-12-02 10:00:00, a change is queued",
    }
