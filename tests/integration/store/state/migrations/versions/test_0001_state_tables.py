"""Revision 0001 adopts the state tables an older vectorsync made before there were migrations: today's main's
and the first release's, each with its rows, which stay; the columns the first release lacked come with their
defaults, and the version ends at the head."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store.state import migrations
from store.state.ledger import LedgerEntry, RunStatus
from store.state.ledger.postgres import PostgresLedger
from tests.integration.state_db import WHEN, fill_first_release, fill_main, fresh_database, load_schema, version


@pytest.fixture
def database(postgres_url: str) -> Iterator[str]:
    with fresh_database(postgres_url) as url:
        yield url


def test_main_s_schema_keeps_its_rows_and_ends_at_the_head(database: str) -> None:
    load_schema(database, "main")
    fill_main(database)
    ledger = PostgresLedger(database)  # what producers and workers construct: it upgrades
    try:
        assert version(database) == [migrations.HEAD]
        assert ledger.entries("notes", ["a"]) == {"a": LedgerEntry("a", "h1", "small", 3, 7, "stamp1")}
        run = ledger.run("run1")
        assert (run.kind, run.full, run.total, run.done, run.skipped, run.status) == (
            "reconcile",
            True,
            10,
            4,
            1,
            RunStatus.RUNNING,
        )
        assert run.moved_at == WHEN
        assert [(f.record_id, f.error, f.attempts) for f in ledger.failures("notes")] == [("b", "boom", 2)]
        alias = ledger.generations.alias("notes")
        assert alias is not None and alias.live == 1
        assert [(g.number, g.chain, g.dimensions, g.run_id) for g in alias.generations] == [
            (1, ("small",), 8, None),
            (2, ("large",), 16, "run1"),
        ]
        assert ledger.run_spend("run1") == []  # the spend table, made for a run that spent before it was counted
        assert (ledger.run("run1").max_tokens, ledger.run("run1").max_cost) == (None, None)  # no caps of its own
        # and the deferred run ends as it would have: its index is still to build
        assert ledger.finish_batch("run1", 1, done=5, skipped=0, failed=0).status == RunStatus.INDEXING
    finally:
        ledger.close()


def test_the_first_release_s_schema_gains_its_columns_with_defaults_and_keeps_its_rows(database: str) -> None:
    load_schema(database, "first")
    fill_first_release(database)
    ledger = PostgresLedger(database)
    try:
        assert version(database) == [migrations.HEAD]
        assert ledger.entries("notes", ["a"]) == {"a": LedgerEntry("a", "h1", "small", 3, 7, "")}
        run = ledger.run("run1")
        assert (run.kind, run.full, run.total, run.done, run.skipped, run.started_at) == (
            "reindex",
            False,
            10,
            4,
            1,
            WHEN,
        )
        assert run.moved_at > WHEN  # counted_at: the upgrade's now() for batches counted before it existed
        assert [(f.record_id, f.error, f.attempts) for f in ledger.failures("notes")] == [("b", "boom", 2)]
        assert ledger.finish_batch("run1", 1, done=5, skipped=0, failed=0).status == RunStatus.DONE  # not deferred
        assert ledger.generations.aliases() == []  # the generations tables are there, empty
        reconcile = ledger.create_run("notes", kind="reconcile")  # the column runs of the first release lacked
        assert ledger.run(reconcile).kind == "reconcile"
    finally:
        ledger.close()
