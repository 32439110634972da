"""``vectorsync failures``: the failed records as a table, or a sentence when there are none."""

from __future__ import annotations

from typer.testing import CliRunner

from producer.cli.app import app
from store.state.ledger import MemoryLedger


def test_no_failures_is_said_in_words_not_as_an_empty_table(ledger: MemoryLedger) -> None:
    shown = CliRunner().invoke(app, ["failures"])
    assert shown.exit_code == 0 and shown.output.strip() == "no failed records"
    scoped = CliRunner().invoke(app, ["failures", "--collection", "notes", "--retry"])
    assert scoped.exit_code == 0 and scoped.output.strip() == "no failed records in notes: nothing to retry"


def test_failures_are_listed_and_a_pushed_one_is_not_replayed(ledger: MemoryLedger) -> None:
    ledger.record_failure("notes", "n1", "InputError: too long")
    shown = CliRunner().invoke(app, ["failures", "--retry"], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    assert "n1" in shown.output and "InputError: too long" in shown.output
    assert "1 failed records belong to pushed collections" in shown.output
