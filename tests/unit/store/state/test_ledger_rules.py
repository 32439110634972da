"""The ledger's rules alone (store/state/ledger/rules.py): both ledgers take them from there."""

from __future__ import annotations

import pytest

from store.contract import RunStatus
from store.state.ledger.rules import status_when_counted


@pytest.mark.parametrize(("status", "expected", "counted", "deferred", "moved"), [
    (RunStatus.RUNNING, 4, 4, False, RunStatus.DONE),
    (RunStatus.RUNNING, 4, 5, False, RunStatus.DONE),  # a batch counted twice over a redelivery still ends it
    (RunStatus.RUNNING, 4, 4, True, RunStatus.INDEXING),  # the bulk path's index build comes next
    (RunStatus.RUNNING, 4, 3, False, None),
    (RunStatus.RUNNING, None, 7, False, None),  # the run is still sending batches: their number is not known
    (RunStatus.RUNNING, 0, 0, False, RunStatus.DONE),  # nothing to index
    (RunStatus.FAILED, 4, 4, False, None),
    (RunStatus.INDEXING, 4, 4, True, None),  # complete_run ends it
    (RunStatus.DONE, 4, 4, False, None),
])
def test_a_run_ends_once_its_batches_are_counted(status: RunStatus, expected: int | None, counted: int,
                                                  deferred: bool, moved: RunStatus | None) -> None:
    assert status_when_counted(status, expected=expected, counted=counted, deferred=deferred) == moved
