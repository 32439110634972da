"""The help of a command group: each command with its whole summary, wrapped, never cut with "..."."""

from __future__ import annotations

from typer.testing import CliRunner

from producer.cli.app import app


def _words(text: str) -> str:
    return " ".join(text.split())


def test_the_apps_help_gives_each_commands_whole_first_sentence() -> None:
    shown = CliRunner().invoke(app, ["--help"], terminal_width=80)
    assert shown.exit_code == 0, shown.output
    listed = _words(shown.output.partition("Commands:")[2])
    assert (
        "reindex Reindex a whole collection; --wait shows progress until it ends, --plan what it would cost." in listed
    )
    assert "relay Move captured changes from the outbox to the broker until Ctrl-C:" in listed
    assert "..." not in listed and max(len(line) for line in shown.output.splitlines()) <= 80


def test_a_sub_groups_help_lists_its_commands_whole_too() -> None:
    shown = CliRunner().invoke(app, ["capture", "--help"], terminal_width=80)
    assert shown.exit_code == 0, shown.output
    listed = _words(shown.output.partition("Commands:")[2])
    assert "status Each captured collection: installed or not, changes waiting in the outbox" in listed
    assert "..." not in listed
