"""The lane state that goes with a ledger: in its state database, or, for a memory ledger, in this process."""

from __future__ import annotations

import weakref

from store.batches.memory import MemoryLaneState
from store.batches.postgres import PostgresLaneState
from store.batches.state import LaneState
from store.state.database import StateDatabase
from store.state.ledger import Ledger

__all__ = ["lane_state"]

_in_memory: weakref.WeakKeyDictionary[object, MemoryLaneState] = weakref.WeakKeyDictionary()


def lane_state(ledger: Ledger) -> LaneState:
    """The batch lane's state beside ``ledger``: the same database, or one in memory per memory ledger."""
    database = getattr(ledger, "database", None)
    if isinstance(database, StateDatabase):
        return PostgresLaneState(database)
    return _in_memory.setdefault(ledger, MemoryLaneState())
