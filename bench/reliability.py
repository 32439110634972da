"""The chaos runs' table, from the runs kept in ``tests/reliability/chaos/runs.json`` (``python -m
tests.reliability.chaos --record`` adds one): every run for docs/reliability.md, the latest long run of each
seed for the README."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["LONG_MINUTES", "RUNS", "full_table", "latest", "load", "short_table"]

RUNS = Path("tests/reliability/chaos/runs.json")
#: Runs of at least this many minutes are the long ones the README shows (CI's are shorter).
LONG_MINUTES = 30


def load(path: Path = RUNS) -> tuple[list[dict[str, Any]], int]:
    """The runs, oldest first, and the seconds a run had to settle after the heal."""
    data = json.loads(path.read_text())
    return data["runs"], data["settle_limit_s"]


def latest(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last long run of each seed, in the order the runs were made."""
    last = {run["seed"]: run for run in runs if run["minutes"] >= LONG_MINUTES}
    return [run for run in runs if any(run is kept for kept in last.values())]


def _count(found: dict[str, int]) -> str:
    parts = [f"{found['records']:,} record{'s' * (found['records'] != 1)}"] if found["records"] else []
    parts += [f"{found['documents']:,} document{'s' * (found['documents'] != 1)}"] if found["documents"] else []
    return ", ".join(parts) or "0"


def _settled(run: dict[str, Any], limit: int) -> str:
    return f"{run['settled_s']:g} s" if run["settled_s"] is not None else f"not within {limit} s"


def _faults(run: dict[str, Any], *, kinds: bool) -> str:
    injected = f"{run['injected']:,} of {run['scheduled']:,}"
    return f"{injected}: {run['kinds']}" if kinds and run["kinds"] else injected


def _writes(run: dict[str, Any]) -> str:
    return f"{run['writes']:,} ({run['refused']:,} refused)"


def full_table(runs: list[dict[str, Any]], limit: int) -> str:
    """Every run: faults injected (of those scheduled, by kind), writes, lost, duplicated, runs left running,
    the outbox left, and when it settled."""
    lines = [
        "| chaos run | faults injected | writes | lost | duplicated | runs left running | outbox "
        "| settled after the heal |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        running = f"{run['running']:,}" + (f" ({run['running_note']})" if run["running_note"] else "")
        lines.append(
            f"| {run['run']} | {_faults(run, kinds=True)} | {_writes(run)} | {_count(run['lost'])} | "
            f"{_count(run['duplicated'])} | {running} | {run['outbox']:,} | {_settled(run, limit)} |"
        )
    return "\n".join(lines)


def short_table(runs: list[dict[str, Any]], limit: int) -> str:
    """The latest long run of each seed: faults, writes, lost, duplicated, settled."""
    lines = [
        "| chaos run | faults injected | writes | lost | duplicated | settled after the heal |",
        "|---|---|---|---|---|---|",
    ]
    for run in latest(runs):
        lines.append(
            f"| {run['run']} | {_faults(run, kinds=False)} | {_writes(run)} | {_count(run['lost'])} | "
            f"{_count(run['duplicated'])} | {_settled(run, limit)} |"
        )
    return "\n".join(lines)
