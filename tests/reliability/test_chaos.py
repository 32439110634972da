"""The seeded chaos run in CI: a short one with a fixed seed (``python -m tests.reliability.chaos`` runs long ones).
Every invariant must hold at the end (``tests/reliability/chaos/invariants.py``)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.reliability.chaos import run
from tests.reliability.conftest import FIGURES

#: The seed CI replays; a seed that ever broke an invariant is added to the long runs' regression list.
SEED = 7
#: Seconds of faults in CI (VECTORSYNC_CHAOS_SECONDS to change it).
SECONDS = float(os.environ.get("VECTORSYNC_CHAOS_SECONDS", "100"))


def test_a_seeded_chaos_run_keeps_every_invariant(tmp_path: Path) -> None:
    lines: list[str] = []
    report = run(tmp_path, seed=SEED, seconds=SECONDS, say=lines.append)
    FIGURES.append(
        {
            "scenario": f"chaos: seed {SEED}, {SECONDS:.0f} s of overlapping faults",
            "faults": sum(report.injected.values()),
            "failed": 0,
            **report.figures,
        }
    )
    print("\n".join(lines))
    assert report.settled_in is not None and report.broken == [], "\n".join(lines)
    assert sum(report.injected.values()) >= len(report.faults) // 2, "\n".join(lines)  # the faults did land
