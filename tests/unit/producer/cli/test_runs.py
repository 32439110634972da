"""``vectorsync runs resume``: a paused run's parked batches sent again as they were, with its new caps; a run
that is not paused refused in one line."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

import producer.cli.runs as runs_cli
from producer.cli import app
from store.broker.producer import Producer
from store.contract import BULK_QUEUE, INDEX_BATCH
from store.settings import Settings
from store.state.ledger import MemoryLedger, Parked, RunStatus


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> tuple[MemoryLedger, list[dict[str, Any]]]:
    ledger, found = MemoryLedger(), []
    producer = Producer(
        Settings(broker={"url": "memory://"}, cache={"url": "memory://"}),
        send=lambda name, **kwargs: found.append({"name": name, **kwargs}),
        ledger=ledger,
    )
    monkeypatch.setattr(runs_cli, "open_producer", lambda: producer)
    return ledger, found


def test_resume_sends_each_parked_batch_again_with_the_new_caps(
    sent: tuple[MemoryLedger, list[dict[str, Any]]],
) -> None:
    ledger, found = sent
    run = ledger.create_run("notes")
    ledger.pause_run(Parked(run_id=run, batch=0, collection="notes", ids=["1"], carried={"done": 1}, fresh=True), "cap")
    ledger.park_batch(Parked(run_id=run, batch=3, collection="notes", ids=["7", "8"]))
    done = CliRunner().invoke(app, ["runs", "resume", run[:9], "--max-tokens", "5000"])
    assert done.exit_code == 0, done.output
    assert done.output == f"run {run} resumed: 2 parked batches sent again\n"
    assert [(s["name"], s["args"], s["kwargs"], s["queue"]) for s in found] == [
        (INDEX_BATCH, ("notes", ["1"]), {"run_id": run, "batch": 0, "carried": {"done": 1}, "fresh": True}, BULK_QUEUE),
        (INDEX_BATCH, ("notes", ["7", "8"]), {"run_id": run, "batch": 3, "carried": None}, BULK_QUEUE),
    ]
    resumed = ledger.run(run)
    assert (resumed.status, resumed.max_tokens) == (RunStatus.RUNNING, 5000)
    assert ledger.resume_run(run, max_tokens=None, max_cost=None) == []  # each unparked once sent


def test_a_run_that_is_not_paused_is_refused_in_one_line(sent: tuple[MemoryLedger, list[dict[str, Any]]]) -> None:
    ledger, found = sent
    run = ledger.create_run("notes")
    ledger.fail_run(run, "broken")
    done = CliRunner().invoke(app, ["runs", "resume", run])
    assert done.exit_code != 0 and found == []
    assert f"run {run} is failed, not paused" in done.output and "Traceback" not in done.output
