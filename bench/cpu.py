"""CPU seconds spent by the processes of a benchmark: this one, its children, and its PostgreSQL server.

Wall time on a 2-core machine shared with other work measures the others too; CPU seconds, summed over
every process that does the work, much less so. Children that have exited count through the parent that
reaped them (``cpu_times().children_*``): PostgreSQL's backends, recycled pool processes.
"""

from __future__ import annotations

import psutil
import sqlalchemy as sa

__all__ = ["CpuMeter"]


class CpuMeter:
    """``seconds()``: CPU so far of this process's tree and of the PostgreSQL server behind ``engine``."""

    def __init__(self, engine: sa.Engine) -> None:
        with engine.connect() as conn:
            backend = int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())
        postmaster = psutil.Process(backend).parent()
        if postmaster is None:
            raise RuntimeError(f"PostgreSQL backend {backend} has no parent process to measure")
        self.roots = [psutil.Process(), postmaster]

    def seconds(self) -> float:
        return sum(self.parts())

    def parts(self) -> tuple[float, float]:
        """CPU so far of this process's tree (the bench, the workers it started, Redis) and of PostgreSQL's."""
        totals, seen = [], set()
        for root in self.roots:
            total = 0.0
            for process in [root, *root.children(recursive=True)]:
                if process.pid in seen:
                    continue
                seen.add(process.pid)
                try:
                    times = process.cpu_times()
                except psutil.Error:  # gone since it was listed: its parent's children_* has it now
                    continue
                total += times.user + times.system + times.children_user + times.children_system
            totals.append(total)
        return totals[0], totals[1]

    def since(self, before: tuple[float, float]) -> tuple[float, float]:
        """``parts()`` spent since ``before`` (an earlier ``parts()``)."""
        ours, postgres = self.parts()
        return ours - before[0], postgres - before[1]
