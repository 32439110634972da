"""Benchmark how fast the ``vectorsync`` command starts: ``--help``, ``status --help`` and ``import producer.cli``.

    .venv/bin/python -m bench.cli_start [--quick]

Each figure is the best of N runs in fresh processes (what an idle machine gives; the median and the CPU
seconds a run are in the row's detail), from an empty folder, so no settings file is found. The same runs
are made in turns on the tree before the CLI deferred its heavy imports (``BEFORE_COMMIT``, taken out with
``git archive`` and compiled), so both sides see the same load; ``ratio`` is before over now (above 1 is
faster now). ``python -c pass`` is the floor: the interpreter's own start. Never run as a test.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.report import Row, print_table
from store.errors import ConfigError

__all__ = ["BEFORE_COMMIT", "main", "run"]

SECTION = "cli start"
ROOT = Path(__file__).resolve().parents[1]
#: What one start may cost on an idle machine (issue 51).
TARGET_SECONDS = 0.25
#: The tree before the change (issue 51): ``store``'s and ``producer``'s __init__ loaded the settings and the
#: client, and the CLI's --help loaded Celery, Redis and pydantic-settings.
BEFORE_COMMIT = "7f6630d"
IMPORT = "import time; t = time.perf_counter(); import producer.cli; print(time.perf_counter() - t)"


@dataclass
class Timing:
    """One command's runs: wall seconds each, CPU seconds in all, and what each printed."""

    walls: list[float] = field(default_factory=list)
    cpu: float = 0.0
    printed: list[str] = field(default_factory=list)


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


@contextmanager
def before_tree() -> Iterator[str]:
    """``store`` and ``producer`` as they were at ``BEFORE_COMMIT``, compiled, in a folder for PYTHONPATH."""
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(
            ["git", "archive", BEFORE_COMMIT, "store", "producer"], cwd=ROOT, capture_output=True, check=False
        )
        if archive.returncode != 0:
            raise ConfigError(f"cannot take out {BEFORE_COMMIT} with git archive: {archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
        subprocess.run([sys.executable, "-m", "compileall", "-q", folder], check=True, capture_output=True)
        yield folder


def timed(commands: dict[str, tuple[list[str], dict[str, str]]], runs: int, folder: str) -> dict[str, Timing]:
    """Each command (argv, environment) run ``runs`` times after one warm-up, all of them in turns."""
    found = {name: Timing() for name in commands}
    for number in range(runs + 1):
        for name, (argv, env) in commands.items():
            cpu, start = _children_cpu(), time.perf_counter()
            done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, check=True)
            if number:  # the first round warms the page cache
                found[name].walls.append(time.perf_counter() - start)
                found[name].cpu += _children_cpu() - cpu
                found[name].printed.append(done.stdout)
    return found


def _row(name: str, now: Timing, before: Timing | None, *, target: bool = True) -> Row:
    best, runs = min(now.walls), len(now.walls)
    detail = f"median {statistics.median(now.walls):.3f} s, CPU {now.cpu / runs:.3f} s a run"
    ratio = None
    if before is not None:
        ratio = round(min(before.walls) / best, 2)
        detail += (
            f"; before ({BEFORE_COMMIT}) best {min(before.walls):.3f} s, CPU {before.cpu / runs:.3f} s a run; "
            "ratio: before / now"
        )
    return Row(
        SECTION,
        f"{name}, best of {runs}",
        round(best, 4),
        "s",
        ratio=ratio,
        target=f"< {TARGET_SECONDS} s" if target else "",
        ok=best < TARGET_SECONDS if target else None,
        detail=detail,
    )


def _inside(timing: Timing) -> Timing:
    """The import's own seconds, as the process printed them."""
    return Timing([float(out) for out in timing.printed], timing.cpu, timing.printed)


def run(quick: bool = False) -> list[Row]:
    """The start rows: 5 runs of each (20 unless ``quick``), before and now in turns."""
    runs = 5 if quick else 20
    script = Path(sys.executable).with_name("vectorsync")
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "producer.cli"]
    now = {k: v for k, v in os.environ.items() if k not in ("VECTORSYNC_CONFIG", "PYTHONPATH")}
    with before_tree() as old, tempfile.TemporaryDirectory() as folder:
        then = dict(now, PYTHONPATH=old)
        commands: dict[str, tuple[list[str], dict[str, str]]] = {"floor": ([sys.executable, "-c", "pass"], now)}
        for name, argv in (
            ("help", [*cli, "--help"]),
            ("status help", [*cli, "status", "--help"]),
            ("import", [sys.executable, "-c", IMPORT]),
        ):
            commands[name], commands[f"{name} before"] = (argv, now), (argv, then)
        found = timed(commands, runs, folder)
    return [
        _row("python -c pass (the floor)", found["floor"], None, target=False),
        _row("vectorsync --help", found["help"], found["help before"]),
        _row("vectorsync status --help", found["status help"], found["status help before"]),
        _row(
            "import producer.cli (inside the process)",
            _inside(found["import"]),
            _inside(found["import before"]),
            target=False,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="5 runs of each")
    print_table(run(quick=parser.parse_args().quick))


if __name__ == "__main__":
    main()
