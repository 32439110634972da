"""The ledger seam: its values, and LedgerContract, what every ledger does, run on the memory ledger (the
reference) in test_memory.py and on PostgreSQL in tests/integration/store/state/ledger/test_postgres.py."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from store.calls.spend import LIVE, Spend
from store.errors import ConfigError
from store.state.ledger import Forgotten, Ledger, LedgerEntry, Parked, RunProgress, RunStatus
from tests.backends import unique_name


def test_an_entry_is_its_value_whenever_it_was_written_and_a_run_counts_what_it_processed() -> None:
    written = datetime(2026, 1, 1, tzinfo=UTC)
    assert LedgerEntry("a", "h", "m", 1, indexed_at=written) == LedgerEntry("a", "h", "m", 1)
    assert LedgerEntry("a", "h", "m", 1, version=2) != LedgerEntry("a", "h", "m", 1)
    progress = RunProgress("r", "notes", RunStatus.RUNNING, 10, 4, 3, 2, False, written, None)
    assert progress.processed == 9


def entry(record_id: str, digest: str = "h", *, version: int = 0, stamp: str = "") -> LedgerEntry:
    return LedgerEntry(record_id, digest, "m", 1, version, stamp)


class LedgerContract:
    """The behaviour every ledger shares; a subclass gives the ``ledger`` fixture."""

    #: Whether the ledger keeps text its database cannot store (NUL, lone surrogates) escaped, not as given.
    escapes_unstorable_text = False

    def test_entries_written_under_the_lock_are_read_back(self, ledger: Ledger) -> None:
        name = unique_name()
        with ledger.locked(name, ["a", "b"]) as held:
            assert held.entries(["a", "b"]) == {}
            held.record_indexed([entry("a", stamp="2026-11-30T00:00:00"), entry("b")])
        assert ledger.entries(name, ["a", "b", "c"]) == {"a": entry("a", stamp="2026-11-30T00:00:00"), "b": entry("b")}
        assert ledger.record_ids(name) == {"a", "b"}
        assert ledger.entries(unique_name(), ["a"]) == {}  # collections are apart

    def test_entries_come_a_page_at_a_time_by_id(self, ledger: Ledger) -> None:
        name = unique_name()
        with ledger.locked(name, ["c", "a", "b"]) as held:
            held.record_indexed([entry("c"), entry("a"), entry("b")])
        first = ledger.entries_page(name, after=None, limit=2)
        assert [e.record_id for e in first] == ["a", "b"] and first[0] == entry("a")
        assert [e.record_id for e in ledger.entries_page(name, after="b", limit=2)] == ["c"]
        assert ledger.entries_page(name, after="c", limit=2) == []
        assert ledger.entries_page(unique_name(), after=None, limit=2) == []

    def test_an_entry_read_back_says_when_it_was_written(self, ledger: Ledger) -> None:
        name, before = unique_name(), datetime.now(UTC)
        with ledger.locked(name, ["a"]) as held:
            held.record_indexed([entry("a")])
        written = ledger.entries(name, ["a"])["a"].indexed_at
        assert written is not None and before - timedelta(seconds=5) <= written <= datetime.now(UTC)

    def test_rows_read_with_the_locks_are_the_rows_entries_reads(self, ledger: Ledger) -> None:
        name = unique_name()
        with ledger.locked(name, ["a", "b", "c"]) as held:
            held.record_indexed([entry("a", version=3, stamp="s"), entry("b", "other")])
        with ledger.locked(name, ["c", "b", "a", "d"], read=True) as held:
            assert held.entries(["a", "b", "c", "d"]) == ledger.entries(name, ["a", "b", "c", "d"])
            assert held.entries(["a", "b", "c", "d"]) == {
                "a": entry("a", version=3, stamp="s"),
                "b": entry("b", "other"),
            }
            assert held.entries(["x"]) == {}  # not locked: asked again
            held.record_indexed([entry("d")])
        assert ledger.entries(name, ["d"]) == {"d": entry("d")}

    def test_rows_read_with_the_locks_hold_what_the_last_holder_committed(self, ledger: Ledger) -> None:
        """The lock is granted once its last holder commits; the rows read with it must be the ones it left,
        not those of when the read was asked (a statement's own snapshot predates the locks it waits for)."""
        name = unique_name()
        holding, asked = threading.Event(), threading.Event()
        seen: dict[str, LedgerEntry] = {}

        def reader() -> None:
            holding.wait(10)
            asked.set()
            with ledger.locked(name, ["a"], read=True) as held:
                seen.update(held.entries(["a"]))

        thread = threading.Thread(target=reader)
        thread.start()
        with ledger.locked(name, ["a"]) as held:
            holding.set()
            asked.wait(10)
            time.sleep(0.3)  # the reader is waiting for the lock now
            held.record_indexed([entry("a", "newest", version=5)])
        thread.join(10)
        assert seen == {"a": entry("a", "newest", version=5)}

    def test_batches_counted_at_once_end_the_run_once_with_every_batch_in(self, ledger: Ledger) -> None:
        run_id = ledger.create_run(unique_name())
        ledger.set_run_total(run_id, total=40, batches=20)
        ended: list[RunStatus] = []

        def count(batch: int) -> None:
            progress = ledger.finish_batch(run_id, batch, done=2, skipped=0, failed=0)
            ended.append(progress.status)

        threads = [threading.Thread(target=count, args=(n % 20,)) for n in range(30)]  # ten counted twice
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        progress = ledger.run(run_id)
        assert (progress.status, progress.done, progress.counted, progress.batches) == (RunStatus.DONE, 40, 20, 20)
        assert RunStatus.DONE in ended

    def test_an_error_inside_the_lock_writes_nothing(self, ledger: Ledger) -> None:
        name = unique_name()
        with pytest.raises(RuntimeError), ledger.locked(name, ["a"]) as held:
            held.record_indexed([entry("a")])
            raise RuntimeError("the swap failed")
        assert ledger.entries(name, ["a"]) == {}

    def test_a_version_never_goes_back(self, ledger: Ledger) -> None:
        name = unique_name()
        with ledger.locked(name, ["d"]) as held:
            held.record_indexed([entry("d", "new", version=20)])
        with ledger.locked(name, ["d"]) as held:
            held.record_indexed([entry("d", "old", version=10)])
        assert ledger.entries(name, ["d"])["d"].version == 20

    def test_forget_drops_entries_and_failures(self, ledger: Ledger) -> None:
        name = unique_name()
        with ledger.locked(name, ["a", "b"]) as held:
            held.record_indexed([entry("a"), entry("b")])
        ledger.record_failure(name, "b", "boom")
        with ledger.locked(name, ["b"]) as held:
            held.forget(["b"])
        assert ledger.record_ids(name) == {"a"} and ledger.failures(name) == []
        ledger.forget_collection(name)
        assert ledger.record_ids(name) == set()

    def test_forget_collection_says_what_it_dropped_and_keeps_runs_and_other_collections(self, ledger: Ledger) -> None:
        name, other = unique_name(), unique_name()
        with ledger.locked(name, ["a", "b"]) as held:
            held.record_indexed([entry("a"), entry("b")])
        with ledger.locked(other, ["a"]) as held:
            held.record_indexed([entry("a")])
        ledger.record_failure(name, "c", "boom")
        ledger.record_failure(other, "c", "boom")
        run_id = ledger.create_run(name)
        assert ledger.forget_collection(name) == Forgotten(entries=2, failures=1)
        assert ledger.record_ids(name) == set() and ledger.failures(name) == []
        assert ledger.record_ids(other) == {"a"} and [f.record_id for f in ledger.failures(other)] == ["c"]
        assert ledger.run(run_id).collection == name  # runs are history
        assert ledger.forget_collection(name) == Forgotten(entries=0, failures=0)

    def test_failures_count_attempts_and_clear_once_indexed(self, ledger: Ledger) -> None:
        name = unique_name()
        ledger.record_failure(name, "x", "first")
        ledger.record_failure(name, "x", "second " + "e" * 5000)
        [failure] = ledger.failures(name)
        assert (failure.record_id, failure.attempts, len(failure.error)) == ("x", 2, 2000)
        assert failure.error.startswith("second")
        with ledger.locked(name, ["x"]) as held:
            held.record_indexed([entry("x")])
        assert ledger.failures(name) == []

    def test_a_run_is_done_when_its_last_batch_is_counted_once(self, ledger: Ledger) -> None:
        name = unique_name()
        run_id = ledger.create_run(name, full=True)
        assert ledger.create_run(name, run_id=run_id) == run_id  # idempotent
        assert ledger.run(run_id).status == RunStatus.RUNNING and ledger.run(run_id).total is None
        ledger.finish_batch(run_id, 0, done=3, skipped=1, failed=0)
        ledger.finish_batch(run_id, 0, done=3, skipped=1, failed=0)  # redelivered: counted once
        assert ledger.set_run_total(run_id, total=8, batches=2).status == RunStatus.RUNNING
        final = ledger.finish_batch(run_id, 1, done=2, skipped=1, failed=1)
        assert (final.status, final.total, final.done, final.skipped, final.failed) == (RunStatus.DONE, 8, 5, 2, 1)
        assert final.processed == 8 and final.full and final.finished_at is not None
        assert run_id in [r.run_id for r in ledger.recent_runs()]

    def test_runs_still_running_are_found_however_many_came_after(self, ledger: Ledger) -> None:
        """A reindex whose task was lost early stayed running behind hundreds of newer sweeps, out of the
        window of the 100 newest runs that the sweep looked at, so no sweep ever closed it (chaos seed 7)."""
        name = unique_name()
        lost = ledger.create_run(name)
        for _ in range(5):
            ledger.set_run_total(ledger.create_run(name, kind="reconcile"), total=0, batches=0)
        assert lost not in [r.run_id for r in ledger.recent_runs(3)]
        assert lost in [r.run_id for r in ledger.recent_runs(3, running=True)]
        assert all(r.status == RunStatus.RUNNING for r in ledger.recent_runs(50, running=True))

    def test_a_failed_run_keeps_its_error_and_unknown_runs_are_config_errors(self, ledger: Ledger) -> None:
        run_id = ledger.create_run(unique_name(), kind="reconcile")
        ledger.fail_run(run_id, "the source is gone")
        failed = ledger.run(run_id)
        assert (failed.status, failed.error, failed.kind) == (RunStatus.FAILED, "the source is gone", "reconcile")
        with pytest.raises(ConfigError, match="no reindex run 'nope': `vectorsync status` lists the runs"):
            ledger.run("nope")

    def test_a_run_fails_whatever_its_error_holds(self, ledger: Ledger) -> None:
        """An error quoting a record's bytes (a NUL, a lone surrogate) must still end the run: PostgreSQL refused
        the write, and the run stayed ``running``."""
        run_id = ledger.create_run(unique_name())
        ledger.fail_run(run_id, "bad row 'a\x00b\ud800'")
        failed = ledger.run(run_id)
        assert failed.status == RunStatus.FAILED and failed.error.startswith("bad row 'a")

    def test_runs_are_found_by_a_unique_prefix_and_remember_when_they_last_moved(self, ledger: Ledger) -> None:
        name = unique_name()
        first = ledger.create_run(name, run_id="feedface" + "0" * 24)
        ledger.create_run(name, run_id="feedface" + "1" * 24)
        assert ledger.resolve_run("feedface0") == first
        assert ledger.resolve_run(first) == first
        with pytest.raises(ConfigError, match="run id 'feedface' is ambiguous: give more of it"):
            ledger.resolve_run("feedface")
        with pytest.raises(ConfigError, match="no reindex run 'beef'"):
            ledger.resolve_run("beef")
        assert ledger.run(first).moved_at == ledger.run(first).started_at
        ledger.finish_batch(first, 0, done=1, skipped=0, failed=0)
        moved = ledger.run(first).moved_at
        assert moved is not None and moved >= ledger.run(first).started_at

    def test_a_run_that_deferred_its_index_says_indexing_until_the_index_is_built(self, ledger: Ledger) -> None:
        run_id = ledger.create_run(unique_name())
        ledger.defer_index(run_id)
        ledger.set_run_total(run_id, total=2, batches=1)
        indexing = ledger.finish_batch(run_id, 0, done=2, skipped=0, failed=0)
        assert indexing.status == RunStatus.INDEXING and indexing.finished_at is None
        assert not indexing.status.ended
        done = ledger.complete_run(run_id)
        assert done.status == RunStatus.DONE and done.status.ended and done.finished_at is not None
        assert ledger.complete_run(run_id).status == RunStatus.DONE  # idempotent
        plain = ledger.create_run(unique_name())
        ledger.set_run_total(plain, total=0, batches=0)
        assert ledger.run(plain).status == RunStatus.DONE  # nothing deferred: done at once

    def test_the_overview_counts_runs_per_state_lists_open_runs_and_counts_failures(self, ledger: Ledger) -> None:
        """Relative to what was there before: the PostgreSQL ledger's database is shared by the session's tests."""
        before = ledger.overview()
        assert set(before.runs) == set(RunStatus)
        name = unique_name()
        running, failed, done = (ledger.create_run(name) for _ in range(3))
        ledger.fail_run(failed, "broken")
        ledger.set_run_total(done, total=0, batches=0)
        ledger.finish_batch(running, 0, done=2, skipped=0, failed=1)
        ledger.record_failure(name, "r1", "e")
        ledger.record_failure(name, "r2", "e")
        ledger.record_failure(name, "r2", "again")  # one record, however many attempts
        after = ledger.overview()
        grown = {status: after.runs[status] - before.runs[status] for status in RunStatus}
        assert grown == {
            RunStatus.RUNNING: 1,
            RunStatus.INDEXING: 0,
            RunStatus.DONE: 1,
            RunStatus.FAILED: 1,
            RunStatus.PAUSED: 0,
        }
        [mine] = [run for run in after.open_runs if run.collection == name]
        assert (mine.run_id, mine.status, mine.processed) == (running, RunStatus.RUNNING, 3)
        assert all(not run.status.ended for run in after.open_runs)
        assert after.failures[name] == 2

    def test_a_failure_of_an_id_postgresql_cannot_store_is_still_recorded(self, ledger: Ledger) -> None:
        name = unique_name()
        ledger.record_failure(name, "bad\x00id\ud800", "ConfigError: record id 'bad\\x00id' is not allowed\x00")
        [failure] = ledger.failures(name)
        if self.escapes_unstorable_text:  # PostgreSQL text holds no NUL and no lone surrogate: kept escaped
            assert failure.record_id == "bad\\x00id\\ud800"
            assert failure.error == "ConfigError: record id 'bad\\x00id' is not allowed\\x00"
        else:
            assert failure.record_id == "bad\x00id\ud800"
            assert failure.error == "ConfigError: record id 'bad\\x00id' is not allowed\x00"

    def test_spend_sums_per_run_collection_model_and_generation(self, ledger: Ledger) -> None:
        run = ledger.create_run(unique_name("notes"))
        first = Spend(
            run_id=run,
            collection="notes",
            model="m",
            generation=1,
            tokens=40,
            calls=1,
            cost=None,
            counted_by="provider",
        )
        ledger.add_spend([first, replace(first, generation=2, tokens=5, counted_by="estimate")])
        ledger.add_spend([replace(first, tokens=60, calls=2, cost=0.5, counted_by="tokenizer")])
        ledger.add_spend([replace(first, run_id=LIVE, tokens=1)])
        ledger.add_spend([])
        assert ledger.run_spend(run) == [
            replace(first, tokens=100, calls=3, cost=0.5, counted_by="tokenizer"),
            replace(first, generation=2, tokens=5, counted_by="estimate"),
        ]
        assert ledger.run_spend("no-such-run") == []
        assert sum(row.tokens for row in ledger.run_spend(LIVE) if row.collection == "notes") >= 1

    def test_the_spend_of_many_runs_is_read_at_once_and_runs_that_spent_nothing_are_left_out(
        self, ledger: Ledger
    ) -> None:
        first, second, idle = (ledger.create_run(unique_name("notes")) for _ in range(3))
        row = Spend(
            run_id=first,
            collection="notes",
            model="m",
            generation=1,
            tokens=7,
            calls=1,
            cost=0.1,
            counted_by="provider",
        )
        ledger.add_spend([row, replace(row, run_id=second, tokens=9), replace(row, run_id=second, generation=2)])
        spent = ledger.runs_spend([first, second, idle])
        assert spent == {first: ledger.run_spend(first), second: ledger.run_spend(second)}
        assert [r.tokens for r in spent[second]] == [9, 7]
        assert ledger.runs_spend([]) == {}

    def test_a_run_s_lane_is_sync_until_it_is_set(self, ledger: Ledger) -> None:
        run = ledger.create_run(unique_name("notes"))
        assert ledger.run(run).lane == "sync"
        ledger.set_lane(run, "batch")
        ledger.create_run("notes", run_id=run)  # made again (a redelivered task): its lane stays
        assert ledger.run(run).lane == "batch"
        with pytest.raises(ConfigError, match="no reindex run"):
            ledger.set_lane("no-such-run", "batch")

    def test_a_paused_run_parks_its_batches_until_resumed_with_new_caps(self, ledger: Ledger) -> None:
        run = ledger.create_run(unique_name("notes"))
        ledger.set_caps(run, max_tokens=100, max_cost=None)
        assert (ledger.run(run).max_tokens, ledger.run(run).max_cost) == (100, None)
        first = Parked(run_id=run, batch=0, collection="notes", ids=["1", "2"], carried={"done": 1}, fresh=True)
        assert not ledger.park_batch(first)  # running: nothing to park, the batch does its work
        assert ledger.pause_run(first, "paused at its budget: max_tokens = 100")
        paused = ledger.run(run)
        assert paused.status == RunStatus.PAUSED and not paused.status.ended and paused.finished_at is None
        assert paused.error == "paused at its budget: max_tokens = 100"
        assert ledger.park_batch(replace(first, batch=1, ids=["3"], carried=None, fresh=False))
        parked = ledger.resume_run(run, max_tokens=500, max_cost=None)
        assert [(p.batch, p.ids, p.carried, p.fresh) for p in parked] == [
            (0, ["1", "2"], {"done": 1}, True),
            (1, ["3"], None, False),
        ]
        resumed = ledger.run(run)
        assert (resumed.status, resumed.error, resumed.max_tokens) == (RunStatus.RUNNING, "", 500)
        assert not ledger.park_batch(first)  # resumed: a late batch does its work
        assert ledger.pause_run(replace(first, ids=["1"]), "again")  # batch 0, sent again, paused it again
        ledger.unpark(parked)  # batch 0 parked again since read: kept; batch 1 dropped
        assert [(p.batch, p.ids) for p in ledger.resume_run(run, max_tokens=None, max_cost=2.5)] == [(0, ["1"])]
        assert (ledger.run(run).max_tokens, ledger.run(run).max_cost) == (500, 2.5)  # None keeps a cap

    def test_only_a_running_run_pauses_and_only_a_paused_or_running_one_resumes(self, ledger: Ledger) -> None:
        run = ledger.create_run(unique_name("notes"))
        ledger.fail_run(run, "broken")
        assert not ledger.pause_run(Parked(run_id=run, batch=0, collection="notes", ids=["1"]), "cap")
        assert ledger.run(run).status == RunStatus.FAILED
        with pytest.raises(ConfigError, match=f"run {run} is failed, not paused"):
            ledger.resume_run(run, max_tokens=None, max_cost=None)
        with pytest.raises(ConfigError, match="no reindex run"):
            ledger.set_caps("no-such-run", max_tokens=1, max_cost=None)
