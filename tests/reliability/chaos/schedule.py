"""A seeded schedule of overlapping faults: the same seed gives the same faults, in the same order, at the same
offsets from the start, so a failing seed replays."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

__all__ = ["KINDS", "KINDS_BY_BROKER", "Fault", "counts", "schedule"]

#: Each kind of fault, with how often it comes relative to the others and how long it lasts (seconds: a
#: process stays dead, a server down, a network or a provider silent or failing).
KINDS: dict[str, tuple[int, tuple[float, float]]] = {
    "kill_pool": (4, (0, 0)),  # kill -9 of one pool process; its worker replaces it
    "kill_main": (3, (1, 5)),  # kill -9 of a worker's main process and its pool; restarted after the pause
    "sigterm": (2, (1, 5)),  # a warm shutdown; restarted once it has exited
    "broker_restart": (2, (1, 4)),  # Redis (AOF) killed, started again
    "postgres_restart": (1, (2, 6)),  # PostgreSQL fast shutdown, started again
    "silence_postgres": (1, (10, 30)),  # every packet between the workers and PostgreSQL dropped
    "silence_broker": (1, (10, 30)),
    "silence_provider": (1, (10, 30)),
    "provider_429": (2, (5, 20)),  # every model endpoint answers 429 (Retry-After 1)
    "provider_503": (2, (5, 20)),
    "kill_relay": (2, (1, 3)),  # kill -9 of the change-capture relay mid-drain; restarted after the pause
}

#: The kinds each broker (``tests.reliability.brokers``) runs, each with its weight and how long it lasts.
#: ``broker_restart`` is that broker's own (Redis killed; a Sentinel's master killed; RabbitMQ's stop_app and
#: start_app), ``silence_broker`` cuts its ports. redis keeps ``KINDS`` as it is, in its order: a seed's schedule
#: (CI replays seed 7) draws the same faults as before there were brokers to choose from.
KINDS_BY_BROKER: dict[str, dict[str, tuple[int, tuple[float, float]]]] = {
    "redis": KINDS,
    "rediss": KINDS,
    # SENTINEL FAILOVER: the replica promoted, the old master its replica once the Sentinel turns it (~8 s)
    "sentinel": {**KINDS, "failover": (2, (0, 0))},
    "rabbitmq": KINDS,
}


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault: when it starts (seconds from the start of the run), its kind, how long it lasts, and which of
    the two workers it hits (for the kinds that hit one)."""

    at: float
    kind: str
    seconds: float
    worker: int

    def __str__(self) -> str:
        target = f" w{self.worker + 1}" if self.kind in ("kill_pool", "kill_main", "sigterm") else ""
        lasts = f" for {self.seconds:.0f}s" if self.seconds else ""
        return f"{self.at:7.1f}s  {self.kind}{target}{lasts}"


def schedule(seed: int, seconds: float, *, every: float = 6.0, broker: str = "redis") -> list[Fault]:
    """Faults over ``seconds``, one starting every ``every`` seconds on average (exponential gaps, so some
    overlap and some come in bursts), none in the last tenth (the run's end is for healing); the kinds that
    ``broker`` runs (``KINDS_BY_BROKER``)."""
    table = KINDS_BY_BROKER[broker]
    rng = random.Random(seed)
    kinds, weights = list(table), [weight for weight, _ in table.values()]
    faults, at = [], rng.expovariate(1 / every)
    while at < seconds * 0.9:
        kind = rng.choices(kinds, weights)[0]
        low, high = table[kind][1]
        faults.append(Fault(round(at, 1), kind, round(rng.uniform(low, high), 1), rng.randrange(2)))
        at += rng.expovariate(1 / every)
    return faults


def counts(faults: list[Fault]) -> Counter[str]:
    """How many faults of each kind."""
    return Counter(fault.kind for fault in faults)
