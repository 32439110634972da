"""The CLI's tables at 80 columns, piped: no word or number cut across two lines, no box drawing, and a sentence
where a table would be empty. Rendered by the commands themselves, with values as long as real ones get."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from producer.cli import collections, console, explain, failures, forget, search, status
from producer.cli.app import app
from producer.cli.tables import Column, layout, show
from store.broker.freshness_log import Freshness
from store.broker.queues import QueueState, WorkerState
from store.calls.spend import Spent
from store.capture.control import CaptureState
from store.contract import RunStatus
from store.explain import Facts, SourceFacts
from store.retrieval.matches import Matches
from store.state.ledger import MemoryLedger, RunProgress
from store.vectors.records import StoredChunk, VectorMatch

STARTED = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
RUN_ID = "3f2b9c1e7d4a45b6a8e2c0f1d9b7a6e5"
COLLECTION = "customer_support_conversations"
WORKER = "celery@vectorsync-worker-bulk-7f9c6d5b8-x2kqp"
PROBLEM = "the relay has not claimed a change for 300s: is a worker running capture.relay?"


@pytest.fixture(params=["pipe", "terminal"])
def printed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """What the CLI's consoles print 80 columns wide, to a pipe (lines whole) or a terminal (lines wrapped)."""
    written = io.StringIO()
    terminal = request.param == "terminal"
    wide = Console(file=written, width=80, force_terminal=terminal, color_system=None, soft_wrap=True, markup=False)
    for module in (console, status, failures, search, collections, explain, forget):
        monkeypatch.setattr(module, "out", wide)
    yield written


def _whole(text: str, words: list[str]) -> None:
    """Every word and number in ``words`` is on one line of ``text``, and no box is drawn; on a terminal, no
    line is wider than 80 (a pipe gets its lines whole)."""
    lines = text.splitlines()
    assert [w for w in words if not any(w in line for line in lines)] == [], text
    assert not set(text) & set("─━│┃╭╮╰╯┏┓┗┛┡┩╇┳┻"), text
    assert status.out.is_terminal is False or max(len(line) for line in lines) <= 80, text


def _run(number: int) -> RunProgress:
    return RunProgress(
        run_id=f"{number}{RUN_ID[1:]}",
        collection=COLLECTION,
        status=RunStatus.RUNNING,
        total=200_000,
        done=134_988,
        skipped=885,
        failed=12,
        full=False,
        started_at=STARTED,
        finished_at=None,
        moved_at=STARTED,
    )


def test_status_at_80_columns_cuts_no_word_or_number(printed: io.StringIO) -> None:
    view = status.Snapshot(
        workers=[WorkerState(WORKER, ("vectorsync.bulk", "vectorsync.live"), active=3)],
        queues=[QueueState("vectorsync.bulk", 135_885, 7300.0, (WORKER,))],
        runs=[(_run(1), None), (_run(2), None)],
        capture=[CaptureState(COLLECTION, True, pending=1234, lag_seconds=12.5, error=PROBLEM)],
        freshness=[Freshness(COLLECTION, 135_885, 1.25, 12.5)],
        spend={_run(1).run_id: Spent(tokens=12_345_678, calls=3, cost=123.4567, counted_by="estimate")},
    )
    status.render(view)
    words = [WORKER, "vectorsync.bulk,", "vectorsync.live", "135885", "2h", COLLECTION, "135885/200000"]
    _whole(printed.getvalue(), [*words, "12,345,678", "123.4567", "11-30 12:00", "1f2b9c1e", "2f2b9c1e", "12.50s"])
    _whole(printed.getvalue(), PROBLEM.split())


def test_status_says_none_where_a_table_would_be_empty(printed: io.StringIO) -> None:
    status.render(status.Snapshot(workers=[WorkerState(WORKER, (), 0)], queues=[], runs=[]))
    text = printed.getvalue()
    assert "no queues" in text and "no runs" in text and "run  collection" not in text, text


def test_failures_at_80_columns_cut_no_word_or_number(ledger: MemoryLedger, printed: io.StringIO) -> None:
    error = "ProviderError: openai text-embedding-3-small answered 400: maximum context length is 8192 tokens"
    ledger.record_failure(COLLECTION, "ticket-2026-11-30-000135885", error)
    done = CliRunner().invoke(app, ["failures"])
    assert done.exit_code == 0, done.output
    _whole(printed.getvalue(), [COLLECTION, "ticket-2026-11-30-000135885", *error.split()])


def test_search_results_at_80_columns_cut_no_word_or_number(
    printed: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "Customer asked about the refund of order 135885 after the subscription renewed"
    found = [VectorMatch("ticket-2026-11-30-000135885#0", 0.87654, text, {"customer_id": 1358850042})]
    monkeypatch.setattr("store.query.search", lambda *args, **kwargs: Matches(found))
    done = CliRunner().invoke(app, ["search", COLLECTION, "refund"])
    assert done.exit_code == 0, done.output
    _whole(printed.getvalue(), ["0.877", "ticket-2026-11-30-000135885#0", *text.split(), "1358850042}"])


def test_search_without_a_match_says_so(printed: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("store.query.search", lambda *args, **kwargs: Matches())
    done = CliRunner().invoke(app, ["search", COLLECTION, "refund"])
    assert done.exit_code == 0 and printed.getvalue().strip() == f"no matches in {COLLECTION}", printed.getvalue()


def test_explains_chunks_at_80_columns_cut_no_word_or_number(printed: io.StringIO) -> None:
    chunk_id = "ticket-2026-11-30-000135885:12"
    text = "Customer asked about the refund of order 135885 after the subscription renewed"
    stored = [StoredChunk(chunk_id, 12, text, "openai-text-embedding-3-large-2026-10", STARTED)]
    source = SourceFacts("sql", True, text=text, stamp="2026-11-30 12:00:00", hash="a" * 64)
    explain.render(Facts(COLLECTION, chunk_id, COLLECTION, "pgvector", source, None, stored, place="its table"))
    _whole(printed.getvalue(), [chunk_id, "openai-text-embedding-3-large-2026-10", "2026-11-30", "135885", "refund"])


def test_forgets_receipt_is_plain_on_a_pipe(ledger: MemoryLedger, printed: io.StringIO) -> None:
    done = CliRunner().invoke(app, ["forget", "notes", "ticket-2026-11-30-000135885", "--yes"])
    assert done.exit_code == 0, done.output
    _whole(printed.getvalue(), ["forgot 1 record(s) of notes", "ledger entries of notes"])


def test_collections_list_without_any_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, printed: io.StringIO
) -> None:
    config = tmp_path / "vectorsync.toml"
    config.write_text('[vectors]\nstore = "memory"\ndimensions = 8\n[broker]\nurl = "memory://"\n')
    monkeypatch.setenv("VECTORSYNC_CONFIG", str(config))
    done = CliRunner().invoke(app, ["collections", "list"])
    assert done.exit_code == 0, done.output
    assert printed.getvalue().startswith("no collections: none is declared"), printed.getvalue()


def test_columns_get_their_longest_word_then_share_the_room() -> None:
    rows: list[list[Any]] = [["a" * 30, "12,345,678", "short"], ["word " * 20, "1", "x"]]
    table = layout([Column("text"), Column("number", whole=True), Column("c")], rows, width=60)
    assert table is not None
    widths = [c.width for c in table.columns if c.header]  # the gaps between them are columns of 2
    assert widths == [41, 10, 5]  # 45 of words, and the 11 left go to the text


def test_rows_too_wide_for_any_table_print_as_a_line_each() -> None:
    written = io.StringIO()
    narrow = Console(file=written, width=25, soft_wrap=True, markup=False)  # 20 + 8 + 2 columns do not fit
    rows = [["x" * 20, "a long sentence"], ["y", "short"]]
    show(narrow, [Column("id", whole=True), Column("text")], rows, empty="none")
    assert written.getvalue() == f"id: {'x' * 20}; text: a long sentence\nid: y; text: short\n"
    show(narrow, [Column("id")], [], empty="no rows")
    assert written.getvalue().endswith("no rows\n")
