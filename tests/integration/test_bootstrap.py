"""scripts/bootstrap as scripts/dev runs it: each install step says what it does and about how long a first run
takes before it starts, and how long it took once done, so a minute of installing never reads as a hang (a fresh
clone's whole first try: tests/integration/producer/cli/dev/test_harness.py)."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.workers import ROOT, child_env

#: A step's first line: what it does and its estimate; the next line of the script's own says how long it took.
STEP = re.compile(r"^scripts/bootstrap: (.+) \(about [^)]+\)\.\.\.$")
DONE = re.compile(r"^scripts/bootstrap:   done in \d+ s$")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_bootstrap_says_each_step_with_an_estimate_and_its_time() -> None:
    env = {k: v for k, v in child_env().items() if k != "VIRTUAL_ENV"}
    result = subprocess.run(
        ["scripts/bootstrap"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=500, check=False
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    lines = result.stdout.splitlines()
    steps = [index for index, line in enumerate(lines) if STEP.match(line)]
    assert sum("installing vectorsync[" in lines[i] for i in steps) == 1, result.stdout
    assert any("compiling the project's modules" in lines[i] for i in steps), result.stdout
    assert all(index + 1 < len(lines) and DONE.match(lines[index + 1]) for index in steps), result.stdout
    assert len([line for line in lines if DONE.match(line)]) == len(steps), result.stdout
