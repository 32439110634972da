"""``[capture]``: how workers relay the changes that triggers on SQL sources write to their outbox."""

from __future__ import annotations

from pydantic import Field

from store.settings.section import Section

__all__ = ["CaptureSettings"]


class CaptureSettings(Section):
    #: Whether each worker's main process runs the relay (``vectorsync relay`` runs one on its own).
    relay: bool = True
    #: Seconds between polls of the outbox: the delay a change waits at most (an empty outbox is one index
    #: probe). With ``source.capture_notify`` a change wakes the relay at once and this is the fallback.
    poll_seconds: float = Field(default=0.5, gt=0, le=3600)
    #: Outbox rows one relay claims, sends and deletes per transaction.
    claim_rows: int = Field(default=5000, gt=0, le=1_000_000)
    #: Seconds between reconcile sweeps of a captured collection (the safety net for writes no trigger sees:
    #: ``session_replication_role = replica``, a disabled trigger); 0: off.
    reconcile_seconds: int = Field(default=86_400, ge=0)
