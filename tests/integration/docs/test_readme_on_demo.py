"""The README's examples run as written against the demo that ``scripts/dev`` (``vectorsync dev``) starts.

A newcomer runs ``scripts/dev``, then types what the README shows: each ``vectorsync`` line must find the
demo's collections (``crm_notes``, ``docs``), metadata keys (``kind``, ``owner``, ``created_at``) and values,
exit 0, and a search or a question must find at least one passage (issue 51: ``--filter '{"owner_id": 7}'``
on a collection the demo does not have answered "no passage matches"). The lines are read out of the README
by tests/docs_examples.py, so a line added there runs here too; a ``bash`` block marked
``<!-- fragment: why -->`` is left out, on purpose (it cannot run on the demo: keep such blocks few).

One dev system, with the ``fake`` model, serves every line; SIGTERM stops it and everything it started.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from producer.cli.dev.banner import SERVING
from tests.docs_examples import CommandLine, blocks, command_lines, run_python
from tests.workers import child_env

#: One demo for the module: its tests run on one xdist worker, else each worker would start a dev system.
pytestmark = pytest.mark.xdist_group("readme-demo")

README = "README.md"
#: The README's ``vectorsync`` lines that run on the demo.
LINES = [c for c in command_lines("bash", "console") if c.where.startswith(f"{README}:") and c.mark != "fragment"]
#: A row of ``vectorsync search``'s table: a score, then a chunk id (``14:0``, ``try:0``).
MATCH_ROW = re.compile(r"-?\d\.\d{3}\W+\S+:\d+\b")
#: Seconds the dev system may take to serve: services, sample tables, both collections indexed (fake model).
START_SECONDS = 300
#: Seconds one README line may take against it.
LINE_SECONDS = 120


def _tail(log: Path, count: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-count:])


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``vectorsync dev --model fake`` serving from a folder of its own: its settings file, until the module's
    tests are done."""
    folder = tmp_path_factory.mktemp("demo")
    log = folder / "dev.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "producer.cli", "dev", "--dir", str(folder / "dev"), "--model", "fake"],
            cwd=folder,
            env=child_env(),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + START_SECONDS
        while SERVING not in log.read_text(errors="replace"):
            assert process.poll() is None, f"vectorsync dev exited with {process.returncode}:\n{_tail(log)}"
            assert time.monotonic() < deadline, f"vectorsync dev not serving after {START_SECONDS}s:\n{_tail(log)}"
            time.sleep(0.5)
        yield folder / "dev" / "vectorsync.toml"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"vectorsync dev still running 60s after SIGTERM:\n{_tail(log)}")
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


def test_the_readme_shows_searches_and_a_question_to_run() -> None:
    """Without them, the run below would prove little."""
    assert {"search", "ask", "reindex"} <= {line.args[0] for line in LINES}, [line.where for line in LINES]


@pytest.mark.slow
@pytest.mark.timeout(START_SECONDS + LINE_SECONDS + 60)
@pytest.mark.parametrize("line", LINES, ids=lambda line: line.where)
def test_a_readme_command_runs_on_the_demo(line: CommandLine, demo: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "producer.cli", *line.args],
        cwd=tmp_path,
        env={**child_env(), "VECTORSYNC_CONFIG": str(demo)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=LINE_SECONDS,
    )
    shown = f"{line.where}: vectorsync {shlex.join(line.args)}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    assert result.returncode == 0, shown
    if line.args[0] == "search":
        assert MATCH_ROW.search(result.stdout), shown
    if line.args[0] == "ask":
        assert "not answered" not in result.stdout and re.search(r"^\[1\] ", result.stdout, re.M), shown


@pytest.mark.slow
@pytest.mark.timeout(START_SECONDS + LINE_SECONDS + 60)
def test_the_readme_search_and_answer_in_python_find_the_demo_s_notes(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    [block] = [b for b in blocks("python", pages=[README]) if "client.search(" in b.text]
    monkeypatch.setenv("VECTORSYNC_CONFIG", str(demo))
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    run_python(block, namespace)
    assert namespace["matches"], block.where
    assert namespace["grounded"].answered, f"{block.where}: {namespace['grounded'].reason}"
