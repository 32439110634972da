"""The lane state that goes with a ledger: in its state database, or, for a memory ledger, in this process."""

from __future__ import annotations

import weakref

from store.batches.memory import MemoryLaneState
from store.batches.postgres import PostgresLaneState
from store.batches.state import LaneState
from store.settings import Settings
from store.state.database import StateDatabase
from store.state.ledger import Ledger, in_process_only, ledger_from_settings

__all__ = ["lane_state", "lanes_running"]

_in_memory: weakref.WeakKeyDictionary[object, MemoryLaneState] = weakref.WeakKeyDictionary()


def lane_state(ledger: Ledger) -> LaneState:
    """The batch lane's state beside ``ledger``: the same database, or one in memory per memory ledger."""
    database = getattr(ledger, "database", None)
    if isinstance(database, StateDatabase):
        return PostgresLaneState(database)
    return _in_memory.setdefault(ledger, MemoryLaneState())


def lanes_running(settings: Settings) -> list[str]:
    """The ids of the running batch-lane runs in the state database of ``settings`` (none in memory)."""
    if in_process_only(settings):
        return []
    ledger = ledger_from_settings(settings)
    try:
        return [run.run_id for run in ledger.recent_runs(limit=1000, running=True) if run.lane == "batch"]
    finally:
        ledger.close()
