"""What ``vectorsync verify`` prints from a report: the summary, each finding, the first drifted records with what
differs, the notes and what a repair did; and the JSON form in full. (The command through its entry point, on
real parts: tests/integration/producer/cli.)"""

from __future__ import annotations

import json

import pytest

from producer.cli.verify import render, to_json
from store.verify import Kind, RecordDrift, Repair, Report


def report(**changes: object) -> Report:
    found = Report(
        "notes", "notes__g2", "pgvector", records=40, chunks=120, seconds=0.25, place="the pgvector table vs_notes__g2"
    )
    found.drifted, found.kinds = 1, {Kind.COUNT: 1}
    found.first = [RecordDrift("42", (Kind.COUNT,), ("the ledger records 3 chunks, the store holds 2; missing 42:2",))]
    for name, value in changes.items():
        setattr(found, name, value)
    return found


def test_render_prints_the_summary_the_findings_and_the_first_drifted_records(
    capsys: pytest.CaptureFixture[str],
) -> None:
    render(report())
    assert capsys.readouterr().out.splitlines() == [
        "notes (in the pgvector table vs_notes__g2, generation notes__g2): 40 records, 120 chunks compared in 0.2 s",
        "drifted  1 records (count 1)",
        "orphans  0 records' 0 chunks no ledger entry accounts for",
        "keywords 0 terms differ from a recount",
        "  42: the ledger records 3 chunks, the store holds 2; missing 42:2",
        "drifted: `vectorsync verify notes --repair` fixes it",
    ]


def test_render_says_what_a_repair_did_and_a_clean_report_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    render(report(repair=Repair(1, 0, 1, 2, ("its records are pushed",)), keyword_terms=2, sample=40))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("notes (in the pgvector table vs_notes__g2, generation notes__g2): a sample of 40")
    assert lines[-2] == (
        "repaired: 1 records forgotten by the ledger and sent to be indexed again, 0 orphans' record ids sent "
        "(a record the source no longer has is deleted), in 1 index_batch tasks; 2 keyword terms recounted"
    )
    assert lines[-1] == "left: its records are pushed"
    render(report(drifted=0, kinds={}, first=[], stale=2))
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2:] == [
        "stale    2 records changed in the source since indexed (not drift: reconcile)",
        "clean",
    ]


def test_json_holds_the_report_in_full_and_whether_it_is_clean() -> None:
    data = json.loads(to_json(report()))
    assert (data["clean"], data["drifted"], data["kinds"]) == (False, 1, {"count": 1})
    assert data["first"][0]["details"] == ["the ledger records 3 chunks, the store holds 2; missing 42:2"]
