"""The batch lane's bench (``bench.lane``) again, with the live queue on a worker of its own (``-Q
vectorsync.live``, one process) beside the worker of the bulk queue: the topology the deploy files name for live
latency while runs go on. Its rows are the lane's, in section ``lane, live worker``.

    .venv/bin/python -m bench --only lane-live
"""

from __future__ import annotations

from dataclasses import replace

from bench.lane import run as run_lane
from bench.report import Row

__all__ = ["SECTION", "run"]

SECTION = "lane, live worker"


def run(quick: bool = False) -> list[Row]:
    """``bench.lane``'s run with the live queue on a worker of its own; each row in this section."""
    return [replace(row, section=SECTION) for row in run_lane(quick, live_worker=True)]
