"""What a run sends (worker.runs.sending): its pool batch once every other batch is counted, and again for records a
batch left after its run ended."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from store.contract import POOL_BATCH
from store.state.ledger import RunProgress, RunStatus
from worker.runs import sending


def _progress(status: RunStatus, *, batches: int | None, counted: int) -> RunProgress:
    now = datetime.now(UTC)
    return RunProgress("r1", "notes", status, 100, 0, 0, 0, False, now, None, batches=batches, counted=counted)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    monkeypatch.setattr(sending, "send_batch", lambda collection, ids, **kwargs: found.append(kwargs))
    return found


@pytest.mark.parametrize(
    ("status", "batches", "counted", "left", "due"),
    [
        (RunStatus.RUNNING, 4, 3, False, True),  # every batch but the pool batch is counted
        (RunStatus.RUNNING, 4, 2, False, False),  # one still to come
        (RunStatus.RUNNING, None, 3, False, False),  # the fan-out has not said how many
        (RunStatus.DONE, 4, 4, False, False),  # ended, nothing left behind
        (RunStatus.DONE, 4, 4, True, True),  # ended, but a late copy of a batch left records in the pool
    ],
)
def test_the_pool_batch_goes_out_when_due(
    sent: list[dict[str, Any]], status: RunStatus, batches: int | None, counted: int, left: bool, due: bool
) -> None:
    sending.flush_when_due("notes", _progress(status, batches=batches, counted=counted), left=left)
    assert sent == ([{"run_id": "r1", "batch": POOL_BATCH, "pooled": True}] if due else [])


def test_a_batch_carries_its_run_its_number_and_what_it_counted() -> None:
    assert sending.batch_kwargs("r1", 3, {"done": 2}, pooled=False) == {
        "run_id": "r1",
        "batch": 3,
        "carried": {"done": 2},
    }
    assert sending.batch_kwargs("r1", 3, None, pooled=True)["pooled"] is True
