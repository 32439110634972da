"""A seeded chaos run: overlapping faults from a seeded schedule on a system of real parts while writes go on;
then heal everything, stop writing, wait for quiet and check every invariant (``invariants.broken``).

``python -m tests.reliability.chaos --minutes 30 --seed 7`` runs one (``--broker`` stands it on another broker:
``tests.reliability.brokers``); ``tests/reliability/test_chaos.py`` runs short ones in CI. The seed and the
schedule are printed first, so a failing seed replays the same faults in the same order.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.reliability.chaos.invariants import broken, caught_up, ended, figures, stale_documents, unended
from tests.reliability.chaos.schedule import Fault, counts, schedule
from tests.reliability.chaos.system import System, system
from tests.reliability.chaos.writers import Writers
from tests.workers import wait_for

__all__ = ["Report", "run"]

#: Seconds the system has, once healed and no longer written to, to reach quiet.
SETTLE_SECONDS = 300


@dataclass
class Report:
    """What a chaos run did and found."""

    seed: int
    faults: list[Fault]
    broker: str = "redis"
    injected: Counter[str] = field(default_factory=Counter)
    writes: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    settled_in: float | None = None
    broken: list[str] = field(default_factory=list)
    #: The reliability table's figures at the end (``invariants.figures``).
    figures: dict[str, int] = field(default_factory=dict)

    def lines(self) -> list[str]:
        kinds = sorted(set(self.injected) | set(counts(self.faults)))
        out = [
            f"seed {self.seed} on {self.broker}: {len(self.faults)} faults scheduled, "
            f"{sum(self.injected.values())} injected",
            *(f"  {kind:<18} {self.injected[kind]:>4} injected of {counts(self.faults)[kind]}" for kind in kinds),
            f"writes: {sum(self.writes.values())} done ({dict(sorted(self.writes.items()))}), "
            f"{sum(self.refused.values())} refused by an outage",
            f"settled {self.settled_in:.0f}s after the heal" if self.settled_in is not None else "never settled",
        ]
        return out + ([f"BROKEN: {line}" for line in self.broken] or ["every invariant held"])

    def entry(self, name: str, minutes: float) -> dict[str, Any]:
        """The run as ``tests/reliability/chaos/runs.json`` keeps it, named ``name`` (the docs' chaos tables)."""
        found = self.figures

        def split(key: str) -> dict[str, int]:
            return {"records": found[key] - found[f"{key}_documents"], "documents": found[f"{key}_documents"]}

        kinds = counts(self.faults)
        return {
            "run": name,
            "seed": self.seed,
            "minutes": minutes,
            "injected": sum(self.injected.values()),
            "scheduled": len(self.faults),
            "kinds": ", ".join(f"{self.injected[kind]} {kind}" for kind in sorted(kinds) if self.injected[kind]),
            "writes": sum(self.writes.values()),
            "refused": sum(self.refused.values()),
            "lost": split("lost"),
            "duplicated": split("duplicated"),
            "running": found["running"],
            "running_note": "",
            "outbox": found["outbox"],
            "settled_s": None if self.settled_in is None else round(self.settled_in),
            "broker": self.broker,
        }


def _inject(made: System, fault: Fault, rng: random.Random) -> bool:
    """Do ``fault`` (and undo it after its seconds); whether it found something to hit."""
    kind, worker = fault.kind, f"w{fault.worker + 1}"
    if kind == "kill_pool":
        return made.kill_pool_process(fault.worker, rng)
    if kind in ("kill_main", "sigterm", "kill_relay"):
        name = "relay" if kind == "kill_relay" else worker
        hit = made.terminate(name) if kind == "sigterm" else made.kill(name)
        time.sleep(fault.seconds)
        made.start(name)
        return hit
    if kind == "broker_restart":
        made.broker.restart(down_seconds=fault.seconds)
        return True
    if kind in made.broker.faults:  # a fault of this broker's own (a Sentinel's failover)
        return made.broker.inject(kind, fault.seconds)
    if kind == "postgres_restart":
        made.restart_postgres(fault.seconds)
        return True
    if kind.startswith("silence_"):
        if made.net is None:
            return False
        target = kind.removeprefix("silence_")
        made.silence(target, True)
        time.sleep(fault.seconds)
        made.silence(target, False)
        return True
    made.provider(int(kind.removeprefix("provider_")))
    time.sleep(fault.seconds)
    made.provider(None)
    return True


def _play(made: System, faults: list[Fault], seed: int, report: Report, say: Callable[[str], None]) -> None:
    """Start each fault at its offset, in a thread of its own (faults overlap); wait for them all."""
    start, threads, rng, lock = time.monotonic(), [], random.Random(seed), threading.Lock()

    def one(fault: Fault) -> None:
        try:
            hit = _inject(made, fault, random.Random(rng.random()))
        except Exception as exc:  # a fault the system would not take (say, a server already down): noted
            say(f"{time.monotonic() - start:7.1f}s  {fault.kind} could not be injected: {exc!r}")
            hit = False
        if hit:
            with lock:
                report.injected[fault.kind] += 1

    for fault in faults:
        time.sleep(max(0.0, start + fault.at - time.monotonic()))
        say(f"  at {time.monotonic() - start:6.1f}s: {fault.kind} (scheduled {fault.at}s)")
        thread = threading.Thread(target=one, args=(fault,), name=f"fault-{fault.kind}", daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join(timeout=600)


def _settle(made: System, writers: Writers, say: Callable[[str], None]) -> float | None:
    """Wait for quiet: the index caught up with the sources; every run started until then ended, beat still
    running (its sweeps close a run whose tasks were lost: that is how a deployment heals one); then, beat
    stopped (the sweeps it keeps starting are runs too), every run ended. When it was quiet (monotonic), or None."""
    try:
        wait_for(
            lambda: caught_up(made, writers.documents), timeout=SETTLE_SECONDS, every=2.0, what="the index to catch up"
        )
        now = datetime.now(UTC)
        wait_for(lambda: ended(made, before=now), timeout=SETTLE_SECONDS, every=2.0, what="the runs before to end")
        made.terminate("beat", wait=30)
        wait_for(lambda: ended(made), timeout=SETTLE_SECONDS, every=2.0, what="every run to end")
    except AssertionError as exc:
        say(f"not quiet: {exc}")
        return None
    return time.monotonic()


def run(
    folder: Path, *, seed: int, seconds: float, say: Callable[[str], None] = print, broker: str = "redis"
) -> Report:
    """One chaos run of ``seconds`` in ``folder`` with the faults of ``seed``, on the broker ``broker``
    (``tests.reliability.brokers.BROKERS``)."""
    faults = schedule(seed, seconds, broker=broker)
    report = Report(seed, faults, broker)
    say(f"chaos: seed {seed}, {seconds:.0f}s on {broker}, {len(faults)} faults:")
    for fault in faults:
        say(f"  {fault}")
    with system(folder, broker=broker) as made:
        writers = Writers(made, seed)
        writers.start()
        made.broker.started_at = writers.started  # its events in the run's seconds, as the faults and writes are
        try:
            _play(made, faults, seed, report, say)
            time.sleep(max(0.0, seconds - (faults[-1].at if faults else 0)) * 0.1)
        finally:
            made.heal()
            writers.stop()
        writers.resend()
        report.writes, report.refused = writers.done, writers.refused
        healed = time.monotonic()
        report.settled_in = _settle(made, writers, say)
        if report.settled_in is not None:
            report.settled_in -= healed
        report.broken = broken(made, writers.documents)
        if stale := stale_documents(made, writers.documents):  # when each was last pushed tells which fault lost it
            times = sorted((writers.pushed_at.get(doc, -1.0), doc) for doc in stale)
            report.broken.append("  last pushed at: " + ", ".join(f"{doc} {at:.1f}s" for at, doc in times))
        if made.broker.events:
            say("broker events: " + "; ".join(f"{at:.1f}s {what}" for at, what in made.broker.events))
        if not ended(made):
            report.broken += [f"  left running: {line}" for line in unended(made)[:20]]
        report.figures = figures(made, writers.documents)
    for line in report.lines():
        say(line)
    return report
