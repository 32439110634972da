"""``PostgresLaneState`` holds to the reference (``MemoryLaneState``): each step of a text's way through the lane,
a submission's record, the waiting batches, one look at a time, one chain of looks, and the purge."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from store.batches.endpoint import Job
from store.batches.memory import MemoryLaneState
from store.batches.postgres import PostgresLaneState
from store.batches.state import CLAIMED, LaneState
from store.state.database import StateDatabase
from store.state.ledger import Parked
from tests.integration.state_db import fresh_database

NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture(params=["memory", "postgres"])
def state(request: pytest.FixtureRequest, postgres_url: str) -> Iterator[LaneState]:
    if request.param == "memory":
        yield MemoryLaneState()
        return
    with fresh_database(postgres_url) as url:
        database = StateDatabase.open(url)
        try:
            yield PostgresLaneState(database)
        finally:
            database.close()


def test_a_text_goes_queued_claimed_answered(state: LaneState) -> None:
    state.queue("r", "m", {"h1": "one", "h2": "two", "h3": "three"})
    state.queue("r", "m", {"h1": "changed? never: the first text stays"})
    state.queue("other", "m", {"h1": "another run's"})
    assert state.unsent("r", "m", 2) == [("h1", "one"), ("h2", "two")]
    state.claim("r-1", "r", "m", [["h2", "h1"], ["h3"]])
    assert state.unsent("r", "m", 10) == []
    assert state.lines("r-1") == [["h2", "h1"], ["h3"]]
    assert state.texts("r-1") == {"h1": "one", "h2": "two", "h3": "three"}
    [submission] = state.submissions("r")
    assert (submission.tag, submission.status, submission.lines, submission.job_id) == ("r-1", CLAIMED, 2, None)
    assert submission.open and submission.submitted_at is not None
    state.update("r-1", Job("batch_1", "in_progress", total=2))
    state.update("r-1", Job("batch_1", "completed", total=2, completed=1, failed=1), tokens=7)
    [submission] = state.submissions("r")
    assert (submission.job_id, submission.status, submission.completed, submission.failed) == (
        "batch_1",
        "completed",
        1,
        1,
    )
    assert submission.tokens == 7 and not submission.open and submission.finished_at is not None
    state.answer(
        "r", "m", {"h1": [0.5, 0.25], "h2": [1.0, 2.0]}, {"h3": "500: boom", "h1": "too late: it has a vector"}
    )
    held = state.held("r", "m", ["h1", "h2", "h3", "unknown"])
    assert held["h1"].vector == [0.5, 0.25] and held["h1"].error is None and held["h2"].vector == [1.0, 2.0]
    assert held["h3"].vector is None and held["h3"].error == "500: boom" and "unknown" not in held
    counts = state.counts("r")
    assert (counts.queued, counts.out, counts.held, counts.failed) == (0, 0, 2, 1)
    state.requeue("r", "m", ["h3", "h1"])  # a held vector is never put back
    assert state.unsent("r", "m", 10) == [("h3", "three")]
    assert state.held("r", "m", ["h1"])["h1"].vector == [0.5, 0.25]


def test_waiting_batches_come_back_whole_once_each(state: LaneState) -> None:
    batch = Parked(run_id="r", batch=2, collection="notes", ids=["1", "2"], carried={"done": 1}, fresh=True)
    state.wait(batch)
    state.wait(batch)
    state.wait(Parked(run_id="r", batch=1, collection="notes", ids=["3"]))
    waiting = state.waiting("r")
    assert [(w.batch, w.ids, w.carried, w.fresh) for w in waiting] == [
        (1, ["3"], None, False),
        (2, ["1", "2"], {"done": 1}, True),
    ]
    state.release(waiting[:1])
    assert [w.batch for w in state.waiting("r")] == [2] and state.waiting("other") == []


def test_one_look_at_a_time_and_one_chain_of_looks(state: LaneState) -> None:
    with state.ticking("r") as first:
        assert first
    with state.ticking("r") as again:
        assert again  # the first look ended: its lock with it
    assert state.schedule("r", "a", mine=None, due=NOW, overdue=NOW - timedelta(minutes=1))
    assert not state.schedule("r", "b", mine=None, due=NOW, overdue=NOW - timedelta(minutes=1))  # a's chain lives
    assert state.schedule("r", "c", mine="a", due=NOW, overdue=NOW - timedelta(minutes=1))  # a's own next look
    assert state.schedule("r", "d", mine=None, due=NOW, overdue=NOW + timedelta(seconds=1))  # c overdue: taken over
    assert not state.schedule("r", "e", mine="c", due=NOW, overdue=NOW - timedelta(minutes=1))


def test_a_run_s_tally_adds_up_by_outcome(state: LaneState) -> None:
    assert state.tallies("r") == {}
    state.tally("r", {"failed": 2, "unrun": 0, "chain": 5})
    state.tally("r", {"failed": 1, "deleted": 10})
    state.tally("other", {"failed": 7})
    assert state.tallies("r") == {"failed": 3, "chain": 5, "deleted": 10}


def test_a_purge_forgets_the_run_s_texts_and_waiting_but_keeps_its_jobs(state: LaneState) -> None:
    state.tally("r", {"chain": 1})
    state.queue("r", "m", {"h1": "one"})
    state.queue("keep", "m", {"h1": "one"})
    state.claim("r-1", "r", "m", [["h1"]])
    state.wait(Parked(run_id="r", batch=1, collection="notes", ids=["1"]))
    state.purge("r")
    assert state.held("r", "m", ["h1"]) == {} and state.waiting("r") == []
    assert [s.tag for s in state.submissions("r")] == ["r-1"] and state.tallies("r") == {"chain": 1}
    assert "h1" in state.held("keep", "m", ["h1"])
