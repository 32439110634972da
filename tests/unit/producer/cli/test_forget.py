"""``vectorsync forget``: it asks first, and prints a receipt of every place it looked in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from producer.cli.app import app
from store.process.defaults import use_client


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    config = tmp_path / "vectorsync.toml"
    config.write_text(
        '[vectors]\nstore = "memory"\ndimensions = 8\n[embeddings]\ncache_ttl_days = 0\n'
        '[broker]\nurl = "memory://"\ncoalesce_seconds = 0\n[collections.notes]\nsource = { kind = "push" }\n'
    )
    monkeypatch.setenv("VECTORSYNC_CONFIG", str(config))
    previous = use_client(None)
    yield config
    built = use_client(previous)
    if built is not None:
        built.close()


def test_forget_asks_first_then_prints_each_place(settings: Path) -> None:
    refused = CliRunner().invoke(app, ["forget", "notes", "a"])
    assert refused.exit_code == 2 and "pass --yes" in refused.output
    done = CliRunner().invoke(app, ["forget", "notes", "a", "\x1b[2Jb", "--yes"])
    assert done.exit_code == 0, done.output
    assert "forgot 2 record(s) of notes" in done.output
    assert "ledger entries of notes" in done.output and "a tombstone" in done.output
    assert "\x1b" not in done.output  # an id is printed escaped
    receipt = json.loads(CliRunner().invoke(app, ["forget", "notes", "a", "--yes", "--json"]).output)
    assert receipt["record_ids"] == ["a"]
    assert {p["place"] for p in receipt["places"]} >= {"pushes kept for a resend (Redis)", "failures of notes"}


def test_an_unknown_collection_or_a_bad_id_is_refused(settings: Path) -> None:
    unknown = CliRunner().invoke(app, ["forget", "nope", "a", "--yes"])
    assert unknown.exit_code == 2 and "'nope' is not configured" in unknown.output
    bad = CliRunner().invoke(app, ["forget", "notes", "", "--yes"])
    assert bad.exit_code == 2 and "record id" in bad.output
