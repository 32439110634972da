"""The ledger's rules alone (store/state/ledger/rules.py): both ledgers take them from there."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from store.contract import RunStatus
from store.errors import ConfigError
from store.state.ledger.base import RunProgress
from store.state.ledger.rules import (
    MAX_ERROR_CHARS,
    MAX_OPEN_RUNS,
    Tally,
    attempts_after,
    ended_at,
    kept_error,
    kept_version,
    newest_first,
    one_run,
    overview,
    started_run,
    status_when_counted,
    status_when_index_built,
    unknown_run,
    with_tally,
)


@pytest.mark.parametrize(
    ("status", "expected", "counted", "deferred", "moved"),
    [
        (RunStatus.RUNNING, 4, 4, False, RunStatus.DONE),
        (RunStatus.RUNNING, 4, 5, False, RunStatus.DONE),  # a batch counted twice over a redelivery still ends it
        (RunStatus.RUNNING, 4, 4, True, RunStatus.INDEXING),  # the bulk path's index build comes next
        (RunStatus.RUNNING, 4, 3, False, None),
        (RunStatus.RUNNING, None, 7, False, None),  # the run is still sending batches: their number is not known
        (RunStatus.RUNNING, 0, 0, False, RunStatus.DONE),  # nothing to index
        (RunStatus.FAILED, 4, 4, False, None),
        (RunStatus.INDEXING, 4, 4, True, None),  # complete_run ends it
        (RunStatus.DONE, 4, 4, False, None),
    ],
)
def test_a_run_ends_once_its_batches_are_counted(
    status: RunStatus, expected: int | None, counted: int, deferred: bool, moved: RunStatus | None
) -> None:
    assert status_when_counted(status, expected=expected, counted=counted, deferred=deferred) == moved


AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def progress(run_id: str = "r", *, status: RunStatus = RunStatus.RUNNING, started_at: datetime = AT) -> RunProgress:
    return RunProgress(
        run_id=run_id,
        collection="notes",
        status=status,
        total=None,
        done=0,
        skipped=0,
        failed=0,
        full=False,
        started_at=started_at,
        finished_at=None,
    )


def test_a_new_run_is_running_with_nothing_counted_under_its_given_id_or_a_fresh_one() -> None:
    run = started_run("notes", run_id="given", full=True, kind="reconcile", at=AT)
    assert run == replace(progress("given"), full=True, kind="reconcile")
    fresh = [started_run("notes", run_id=None, full=False, kind="reindex", at=AT).run_id for _ in range(2)]
    assert fresh[0] != fresh[1] and all(len(i) == 32 and int(i, 16) >= 0 for i in fresh)


@pytest.mark.parametrize(
    ("status", "moved"),
    [
        (RunStatus.INDEXING, RunStatus.DONE),
        (RunStatus.RUNNING, None),  # its batches are not all in: finish_batch ends it
        (RunStatus.DONE, None),  # complete_run again: nothing moves
        (RunStatus.FAILED, None),
    ],
)
def test_only_a_run_building_its_index_is_done_once_the_index_is_built(
    status: RunStatus, moved: RunStatus | None
) -> None:
    assert status_when_index_built(status) == moved


@pytest.mark.parametrize(
    ("status", "finished"),
    [
        (RunStatus.DONE, AT),
        (RunStatus.FAILED, AT),
        (RunStatus.INDEXING, None),
        (RunStatus.RUNNING, None),
    ],
)
def test_a_run_finishes_when_it_moves_to_an_ended_status(status: RunStatus, finished: datetime | None) -> None:
    assert ended_at(status, AT) == finished


def test_a_run_prefix_names_one_run_or_says_why_not() -> None:
    assert one_run("ab", ["ab", "abc"]) == "ab"  # the whole id wins over the longer ones it starts
    assert one_run("ab", ["abc"]) == "abc"
    with pytest.raises(ConfigError, match=r"^no reindex run 'ab': `vectorsync status` lists the runs$"):
        one_run("ab", [])
    with pytest.raises(ConfigError, match=r"^run id 'ab' is ambiguous: give more of it \(`vectorsync status`"):
        one_run("ab", ["abc", "abd"])
    assert unknown_run("x") == "no reindex run 'x': `vectorsync status` lists the runs"


def test_a_tally_sums_the_batches_counted() -> None:
    assert Tally.of([(3, 1, 0), (2, 1, 1)], AT) == Tally(done=5, skipped=2, failed=1, counted=2, moved_at=AT)
    assert Tally.of([], None) == Tally()


def test_a_runs_progress_is_its_tally_and_it_last_moved_at_its_last_batch_else_its_start() -> None:
    later = AT + timedelta(minutes=5)
    counted = with_tally(progress(), Tally(5, 2, 1, 2, later), batches=3)
    assert (counted.done, counted.skipped, counted.failed, counted.processed) == (5, 2, 1, 8)
    assert (counted.counted, counted.batches, counted.moved_at) == (2, 3, later)
    fresh = with_tally(progress(), Tally(), batches=None)
    assert (fresh.processed, fresh.counted, fresh.batches, fresh.moved_at) == (0, 0, None, AT)


def test_the_newest_runs_come_first_and_at_most_as_many_as_asked() -> None:
    runs = [progress(str(n), started_at=AT + timedelta(seconds=n)) for n in (1, 3, 2)]
    assert [r.run_id for r in newest_first(runs, 2)] == ["3", "2"]
    assert newest_first([], 5) == []


def test_the_overview_has_every_status_and_at_most_the_newest_open_runs_and_no_empty_failures() -> None:
    open_runs = [progress(str(n)) for n in range(MAX_OPEN_RUNS + 5)]
    seen = overview({"running": 3, "done": 2}, open_runs, {"notes": 4, "empty": 0})
    assert seen.runs == {
        RunStatus.RUNNING: 3,
        RunStatus.INDEXING: 0,
        RunStatus.DONE: 2,
        RunStatus.FAILED: 0,
        RunStatus.PAUSED: 0,
    }
    assert seen.open_runs == open_runs[:MAX_OPEN_RUNS]
    assert seen.failures == {"notes": 4}


@pytest.mark.parametrize(("new", "known", "kept"), [(5, None, 5), (5, 3, 5), (3, 5, 5), (0, 0, 0)])
def test_a_version_never_goes_back(new: int, known: int | None, kept: int) -> None:
    assert kept_version(new, known) == kept


def test_each_failure_is_one_more_attempt() -> None:
    assert (attempts_after(None), attempts_after(1), attempts_after(7)) == (1, 2, 8)


def test_error_texts_are_kept_to_their_first_max_error_chars_characters() -> None:
    assert MAX_ERROR_CHARS == 2000
    assert kept_error("short") == "short"
    long = "x" * MAX_ERROR_CHARS
    assert kept_error(long + "cut") == long and kept_error("") == ""
