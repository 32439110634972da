"""Every ``vectorsync`` command in README.md and docs/*.md parses against the real CLI, and every synopsis
names real commands and options (the conventions: tests/docs_examples.py). Nothing runs."""

from __future__ import annotations

import pytest
import typer

from tests.docs_examples import CommandLine, cli_command_paths, command_lines, parse_command, synopsis_problems

EXAMPLES = command_lines("bash", "console")
SYNOPSES = command_lines("text")


@pytest.mark.parametrize("line", EXAMPLES, ids=lambda c: c.where)
def test_a_command_in_an_example_parses(line: CommandLine) -> None:
    try:
        parse_command(line.args)
    except typer.TyperException as exc:
        pytest.fail(f"{line.where}: vectorsync {' '.join(line.args)}: {exc.format_message()}")  # type: ignore[attr-defined]


@pytest.mark.parametrize("line", SYNOPSES, ids=lambda c: c.where)
def test_a_synopsis_names_real_commands_and_options(line: CommandLine) -> None:
    assert synopsis_problems(line.args) == [], line.where


def test_every_command_is_in_a_synopsis_or_an_example() -> None:
    shown = {" ".join(["vectorsync", *(w.strip("[]") for w in c.args)]) for c in [*EXAMPLES, *SYNOPSES]}
    assert [path for path in cli_command_paths() if not any(s == path or s.startswith(path + " ") for s in shown)] == []


@pytest.mark.parametrize(
    "args, problem",
    [
        (["search", "notes", "onboarding", "--limitt", "5"], "No such option: --limitt"),
        (["reindex", "notes", "--timeout", "soon"], "Invalid value for '--timeout'"),
        (["collections", "empty", "notes"], "No such command 'empty'"),
        (["search"], "Missing argument 'collection'"),
    ],
)
def test_a_broken_command_fails_to_parse(args: list[str], problem: str) -> None:
    with pytest.raises(typer.TyperException) as raised:
        parse_command(args)
    assert problem in raised.value.format_message()  # type: ignore[attr-defined]


def test_a_synopsis_with_an_unknown_option_or_command_is_caught() -> None:
    assert synopsis_problems(["status", "[--jsn]"]) == ["vectorsync status has no option --jsn"]
    assert synopsis_problems(["capture", "wipe", "NAME"]) == ["vectorsync capture has no command wipe"]
