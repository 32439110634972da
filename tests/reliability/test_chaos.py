"""The seeded chaos runs in CI: short ones with a fixed seed (``python -m tests.reliability.chaos`` runs long ones),
on plain Redis and on a Sentinel's master and replica. Every invariant must hold at the end
(``tests/reliability/chaos/invariants.py``).

Of the other brokers (``tests.reliability.brokers``), CI runs ``sentinel``: it needs nothing but the redis-server
every machine has (TLS needs one built with it), it changes nothing another test uses (``rabbitmq`` stops the
machine's RabbitMQ, under the RabbitMQ tests of other pytest workers), and it runs the most: the master killed
with the Sentinel failing over, SENTINEL FAILOVER, replication, and the clients finding the new master.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.reliability.chaos import run
from tests.reliability.conftest import FIGURES

#: The seed CI replays; a seed that ever broke an invariant is added to the long runs' regression list.
SEED = 7
#: Seconds of faults in CI (VECTORSYNC_CHAOS_SECONDS to change it).
SECONDS = float(os.environ.get("VECTORSYNC_CHAOS_SECONDS", "100"))


@pytest.mark.xdist_group("chaos")  # one after the other: two chaos runs at once on 2 cores test the machine
@pytest.mark.parametrize("broker", ["redis", "sentinel"])
def test_a_seeded_chaos_run_keeps_every_invariant(tmp_path: Path, broker: str) -> None:
    lines: list[str] = []
    report = run(tmp_path, seed=SEED, seconds=SECONDS, say=lines.append, broker=broker)
    on = "" if broker == "redis" else f" on {broker}"
    FIGURES.append(
        {
            "scenario": f"chaos{on}: seed {SEED}, {SECONDS:.0f} s of overlapping faults",
            "faults": sum(report.injected.values()),
            "failed": 0,
            **report.figures,
        }
    )
    print("\n".join(lines))
    assert report.settled_in is not None and report.broken == [], "\n".join(lines)
    assert sum(report.injected.values()) >= len(report.faults) // 2, "\n".join(lines)  # the faults did land
