"""The verdict of ``explain``, one state at a time, on Facts built by hand: the rule is pure."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from store.explain import Facts, SourceFacts, State, verdict
from store.state.ledger import Failure, LedgerEntry
from store.vectors.records import StoredChunk

WRITTEN = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
CHUNKS = [StoredChunk("42:0", 0, "renewal call", "m"), StoredChunk("42:1", 1, "pricing", "m")]


def facts(**changes: object) -> Facts:
    """A record that is searchable and current: the source hashes as the ledger says, every chunk stored."""
    current = Facts(
        collection="notes",
        record_id="42",
        generation="notes",
        backend="pgvector",
        source=SourceFacts("sql", True, text="renewal call pricing", stamp="2026-12-01 09:00:00", hash="h1"),
        entry=LedgerEntry("42", "h1", "m", 2, indexed_at=WRITTEN),
        chunks=CHUNKS,
        outbox_rows=None,
        queued=False,
    )
    return replace(current, **changes)  # type: ignore[arg-type]


def changed(stamp: str = "2026-12-02 10:00:00") -> SourceFacts:
    return SourceFacts("sql", True, text="renewal call, new pricing", stamp=stamp, hash="h2")


def test_current() -> None:
    assert verdict(facts()) == verdict(facts())
    found = facts().verdict
    assert (found.state, found.line) == (State.CURRENT, "searchable and current")


def test_current_with_a_change_queued_that_hashes_the_same_says_so() -> None:
    assert facts(queued=True).verdict.line == "searchable and current; a change is queued"


def test_stale_with_a_change_queued_by_the_coalescing_mark() -> None:
    found = facts(source=changed(), queued=True).verdict
    assert found.state == State.STALE
    assert found.line == "stale: the source changed at 2026-12-02 10:00:00, a change is queued"


def test_stale_with_a_change_waiting_in_the_capture_outbox() -> None:
    found = facts(source=changed(), outbox_rows=1, queued=None).verdict
    assert found.line == "stale: the source changed at 2026-12-02 10:00:00, a change is queued"


def test_stale_with_nothing_queued_names_the_command_that_indexes_it() -> None:
    found = facts(source=changed(stamp=""), outbox_rows=0).verdict
    assert found.state == State.STALE
    assert found.line == (
        "stale: the source changed since it was indexed at 2026-12-01 09:30:00 and nothing is queued: "
        "run `vectorsync index notes 42`"
    )


def test_failed_shows_the_error_and_the_retry_command() -> None:
    failure = Failure("notes", "42", "provider said 400:\n input too long", 3, WRITTEN)
    found = facts(failure=failure, source=changed()).verdict
    assert found.state == State.FAILED
    assert found.line == (
        "failed: provider said 400: input too long (3 attempts), retry with `vectorsync failures --retry`"
    )


def test_a_failed_pushed_record_is_pushed_again_not_retried() -> None:
    failure = Failure("docs", "42", "boom", 1, WRITTEN)
    found = facts(failure=failure, source=SourceFacts("push", None)).verdict
    assert found.line == "failed: boom (1 attempts), push it again with index_document"


def test_missing_when_the_store_lost_every_chunk() -> None:
    found = facts(chunks=[]).verdict
    assert found.state == State.MISSING
    assert found.line == (
        "missing: the store lost its 2 chunks (the ledger still records them); run `vectorsync verify notes "
        "--repair` (`vectorsync index` alone skips it as unchanged)"
    )


def test_missing_when_the_store_holds_some_of_the_chunks() -> None:
    found = facts(chunks=CHUNKS[:1]).verdict
    assert found.line.startswith("missing: the store holds 1 of the 2 chunks the ledger recorded; ")


def test_missing_chunks_of_a_pushed_record_are_pushed_again() -> None:
    found = facts(source=SourceFacts("push", None), chunks=[]).verdict
    assert found.line.endswith(
        "push it again (index_document), or delete it; `vectorsync verify` lists every such record"
    )


def test_an_id_the_shell_would_split_is_quoted_in_the_command() -> None:
    found = facts(record_id="a b's", source=changed()).verdict
    assert found.line.endswith("nothing is queued: run `vectorsync index notes 'a b'\\''s'`")


def test_gone_from_the_source_with_nothing_stored() -> None:
    found = facts(source=SourceFacts("sql", False), entry=LedgerEntry("42", "", "", 0), chunks=[]).verdict
    assert (found.state, found.line) == (State.GONE, "gone from the source: nothing of it is stored, as it should be")


def test_gone_from_the_source_with_chunks_left_and_a_change_queued() -> None:
    found = facts(source=SourceFacts("sql", False), queued=True).verdict
    assert (
        found.line == "gone from the source: its 2 chunks are still searchable; a change is queued, which deletes them"
    )


def test_gone_from_the_source_with_chunks_left_and_nothing_queued() -> None:
    found = facts(source=SourceFacts("python", False)).verdict
    assert found.line == (
        "gone from the source: its 2 chunks are still searchable: run `vectorsync index notes 42` to delete them"
    )


def test_gone_wins_over_a_failure_of_the_record_it_was() -> None:
    failure = Failure("notes", "42", "boom", 1, WRITTEN)
    assert facts(source=SourceFacts("sql", False), failure=failure).verdict.state == State.GONE


def test_not_indexed_yet() -> None:
    assert facts(entry=None, chunks=[]).verdict.line == (
        "not indexed yet and nothing is queued: run `vectorsync index notes 42`"
    )
    assert facts(entry=None, chunks=[], queued=True).verdict.line == "not indexed yet: a change is queued"


def test_a_pushed_record_is_indexed_not_current_since_its_content_is_the_apps() -> None:
    found = facts(source=SourceFacts("push", None), entry=LedgerEntry("42", "h1", "m", 2, version=7)).verdict
    assert found.state == State.INDEXED
    assert found.line.startswith("searchable: its pushed version 7 is indexed")


def test_a_pushed_record_never_pushed_or_deleted_by_a_push() -> None:
    pushed = SourceFacts("push", None)
    assert facts(source=pushed, entry=None, chunks=[]).verdict.state == State.NOT_INDEXED
    deleted = facts(source=pushed, entry=LedgerEntry("42", "", "", 0, version=9), chunks=[]).verdict
    assert (deleted.state, deleted.line) == (
        State.GONE,
        "gone: its push of version 9 deleted it, and nothing of it is stored",
    )


def test_unknown_when_the_source_could_not_be_read() -> None:
    source = SourceFacts("sql", None, note="could not be read (source database down)")
    found = facts(source=source).verdict
    assert (found.state, found.line) == (State.UNKNOWN, "unknown: could not be read (source database down)")


@pytest.mark.parametrize("state", list(State))
def test_every_state_has_a_case_here(state: State) -> None:
    cases = [
        facts(),
        facts(source=SourceFacts("push", None)),
        facts(source=changed()),
        facts(entry=None, chunks=[]),
        facts(failure=Failure("notes", "42", "e", 1, WRITTEN)),
        facts(chunks=[]),
        facts(source=SourceFacts("sql", False)),
        facts(source=SourceFacts("sql", None)),
    ]
    assert state in {case.verdict.state for case in cases}
