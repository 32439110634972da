"""The last sampled verify of each collection, kept in the cache's Redis so that every worker's metrics endpoint
exports it (``vectorsync_drifted_records``), whichever worker ran it.

Celery beat sends a ``verify`` task per collection every ``worker.verify_seconds``; it checks
``worker.verify_sample`` records drawn at random and keeps its verdict here. Without a Redis cache nothing is
kept: the task still logs what it found.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from store.connect.redis import redis_client
from store.contract import REDIS_SCHEMES, VERIFIED_KEY_PREFIX
from store.settings import NetworkSettings
from store.verify.drift import Report

__all__ = ["Verdict", "Verdicts"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a verify found: records drifted (orphans' records included), records checked, and when (epoch)."""

    drifted: int
    checked: int
    at: float

    @classmethod
    def of(cls, report: Report) -> Verdict:
        return cls(report.drifted + report.orphan_records, report.records, time.time())


class Verdicts:
    """Each collection's last verdict, in the cache's Redis (none kept without one)."""

    def __init__(self, url: str | None, *, network: NetworkSettings | None = None) -> None:
        self.client: Any = None
        if url and url.startswith(REDIS_SCHEMES):
            self.client = redis_client(url, network, timeout=2)

    def keep(self, collection: str, verdict: Verdict) -> None:
        """Keep ``verdict`` as ``collection``'s last. Raises what Redis raises."""
        if self.client is not None:
            self.client.hset(
                VERIFIED_KEY_PREFIX + collection,
                mapping={"drifted": verdict.drifted, "checked": verdict.checked, "at": verdict.at},
            )

    def last(self, collection: str) -> Verdict | None:
        """``collection``'s last verdict; None when it was never verified (or nothing is kept)."""
        if self.client is None:
            return None
        found = self.client.hgetall(VERIFIED_KEY_PREFIX + collection)
        if not found:
            return None
        fields = {(k.decode() if isinstance(k, bytes) else k): float(v) for k, v in found.items()}
        return Verdict(int(fields["drifted"]), int(fields["checked"]), fields["at"])

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
