"""The examples of README.md and docs/*.md, read out of their fences, and what runs or parses them.

What tests/unit/docs and tests/integration/docs hold every example to, by the fence's language:

- ``python`` runs. The blocks of one page run in order in one namespace, as a reader reads them, with the
  settings and the names the prose assumes (``note``, ``user``, ...) that the test module sets up for that
  page. A statement followed at once by a comment ``# SomeError: message`` must raise SomeError with exactly
  that message. Top-level ``await`` runs in an event loop of its own.
- ``toml`` loads with ``store.settings.load_settings`` as a whole settings file. There are no partial
  snippets: a snippet keeps its table header, which is what says where its keys go.
- ``bash`` lines and ``console`` ``$`` lines that run ``vectorsync`` parse against the real CLI (Typer's
  click command, ``make_context``: options, arguments and their types; nothing runs).
- ``text`` blocks of ``vectorsync`` lines are synopses (``[--full]``, ``NAME``): each command they name
  exists, and each ``--option`` they show is one of that command's.

The line before a fence may mark its block, as an HTML comment (neither GitHub nor MkDocs shows it):

- ``<!-- fragment: why -->``: not run, on purpose (a Python fragment is still parsed, a TOML one still read
  as TOML, a ``bash`` one's lines still parsed but left out of the README's run against the demo of
  ``vectorsync dev``, tests/integration/docs/test_readme_on_demo.py); the reason says what it would need.
  Keep fragments a small minority.
- ``<!-- integration: what it needs -->``: tests/integration/docs runs it (PostgreSQL, a process of its own),
  not tests/unit/docs.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: The pages whose examples are held to the conventions above.
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]
MARKS = ("fragment", "integration")
_MARK = re.compile(r"^<!-- (\w+): (.+?) -->$")
_EXPECTED = re.compile(r"^\s*# (\w+(?:Error|Exception)): (.+)$")
_SHELL_STOP = {"<", ">", "|", "||", "&&", ";", "&", "2>"}
_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


@dataclass(frozen=True)
class Block:
    """One fenced example: its page, the page line of its first code line, its language and text, and its
    mark (``fragment``, ``integration`` or None) with the mark's reason."""

    page: str
    line: int
    lang: str
    text: str
    mark: str | None = None
    reason: str = ""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(lang: str | None = None, *, pages: list[str] | None = None) -> list[Block]:
    """Every fenced block of ``pages`` (default: all), of language ``lang`` when given."""
    found = [b for page in (pages or PAGES) for b in _page_blocks(page)]
    return [b for b in found if lang is None or b.lang == lang]


def _page_blocks(page: str) -> Iterator[Block]:
    lines = (ROOT / page).read_text().split("\n")
    start: int | None = None
    for number, line in enumerate(lines, 1):
        if not line.startswith("```"):
            continue
        if start is None:
            start = number
            continue
        opening = lines[start - 1]
        mark = _MARK.match(lines[start - 2]) if start > 1 else None
        if mark and mark.group(1) not in MARKS:
            raise ValueError(f"{page}:{start - 1}: unknown mark {mark.group(1)!r}; the marks are {MARKS}")
        yield Block(
            page,
            start + 1,
            opening[3:].strip(),
            "\n".join(lines[start : number - 1]) + "\n",
            mark.group(1) if mark else None,
            mark.group(2) if mark else "",
        )
        start = None


# --- python ---------------------------------------------------------------------------------------------


def run_python(block: Block, namespace: dict[str, Any]) -> None:
    """Run ``block`` statement by statement in ``namespace``, holding each to its ``# SomeError: ...`` comment.
    Tracebacks name the page and its line."""
    lines = block.text.split("\n")
    for statement in ast.parse(block.text, block.where).body:
        after = statement.end_lineno or statement.lineno  # the line after the statement, 0-based
        expected = _EXPECTED.match(lines[after]) if after < len(lines) else None
        here = f"{block.page}:{block.line + statement.lineno - 1}"
        module = ast.increment_lineno(ast.Module(body=[statement], type_ignores=[]), block.line - 1)
        code = compile(module, str(ROOT / block.page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        try:
            result = eval(code, namespace)  # exec-mode code: None, or a coroutine when it awaits
            if inspect.iscoroutine(result):
                asyncio.run(result)
        except Exception as exc:
            if expected is None:
                raise
            wanted = f"{expected.group(1)}: {expected.group(2)}"
            assert f"{type(exc).__name__}: {exc}" == wanted, here
        else:
            assert expected is None, f"{here} should raise {expected.group(1)}: {expected.group(2)}"


# --- the command line -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandLine:
    """A ``vectorsync`` command an example shows: where, its arguments after ``vectorsync``, and its block's
    mark."""

    where: str
    args: list[str]
    mark: str | None = None


def command_lines(*langs: str) -> list[CommandLine]:
    """The ``vectorsync`` lines of the blocks in ``langs``: every line of ``bash`` and ``text`` blocks, the
    ``$`` lines of ``console`` blocks. Environment assignments and a path before ``vectorsync`` are dropped,
    and so is what follows a redirection, a pipe or a comment."""
    found = []
    for block in (b for b in blocks() if b.lang in langs):
        for offset, line in enumerate(block.text.split("\n")):
            if block.lang == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            args = _vectorsync_args(line, synopsis=block.lang == "text")
            if args is not None:
                found.append(CommandLine(f"{block.page}:{block.line + offset}", args, block.mark))
    return found


def _vectorsync_args(line: str, *, synopsis: bool) -> list[str] | None:
    # A synopsis's brackets and placeholders are no shell: split it on blanks, cut at its comment.
    words = line.split("  #")[0].split() if synopsis else shlex.split(line, comments=True)
    while words and _ASSIGNMENT.match(words[0]):
        words = words[1:]
    if not words or words[0].rsplit("/", 1)[-1] != "vectorsync":
        return None
    args = words[1:]
    stop = next((i for i, word in enumerate(args) if word in _SHELL_STOP), len(args))
    return args[:stop]


def cli_command() -> Any:
    """The click command Typer builds from the ``vectorsync`` app."""
    import typer

    from producer.cli import app

    return typer.main.get_command(app)


def parse_command(args: list[str]) -> Any:
    """Parse ``args`` as ``vectorsync ARGS`` would, down to the command they name; returns its click context.
    Raises Typer's UsageError (a TyperException) for an unknown command or option, or a bad value."""
    command, name, context = cli_command(), "vectorsync", None
    while True:
        context = command.make_context(name, list(args), parent=context)
        if not hasattr(command, "resolve_command"):  # a command, not a group
            return context
        rest = [*context._protected_args, *context.args]  # what the group left to its subcommand
        if not rest:
            return context
        name, command, args = command.resolve_command(context, rest)


def synopsis_problems(args: list[str]) -> list[str]:
    """What a synopsis line's words name that the CLI lacks: a command, or an option of that command."""
    command = cli_command()
    words = [w.strip("[]").split("=")[0] for w in args]
    path = ["vectorsync"]
    while hasattr(command, "commands") and words and words[0] in command.commands:
        path.append(words[0])
        command = command.commands[words.pop(0)]
    if hasattr(command, "commands"):
        return [f"{' '.join(path)} has no command {words[0] if words else '(none given)'}"]
    options = {opt for param in command.params for opt in [*param.opts, *param.secondary_opts]}
    options |= {"--help"}
    return [f"{' '.join(path)} has no option {w}" for w in words if w.startswith("-") and w not in options]


def cli_command_paths() -> list[str]:
    """Every command of the CLI (groups' subcommands, not the groups), as ``vectorsync capture enable``."""

    def walk(command: Any, path: str) -> Iterator[str]:
        for name, sub in sorted(command.commands.items()):
            yield from walk(sub, f"{path} {name}") if hasattr(sub, "commands") else [f"{path} {name}"]

    return list(walk(cli_command(), "vectorsync"))
