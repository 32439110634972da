"""The lane state beside a memory ledger is one per ledger, kept as long as the ledger is."""

from __future__ import annotations

from store.batches.memory import MemoryLaneState
from store.batches.opened import lane_state, lanes_running
from store.settings import Settings
from store.state.ledger import MemoryLedger


def test_a_memory_ledger_has_one_lane_state_of_its_own() -> None:
    first, second = MemoryLedger(), MemoryLedger()
    assert isinstance(lane_state(first), MemoryLaneState)
    assert lane_state(first) is lane_state(first) and lane_state(first) is not lane_state(second)


def test_settings_that_keep_everything_in_process_have_no_running_lanes() -> None:
    assert lanes_running(Settings(vectors={"store": "memory"})) == []
