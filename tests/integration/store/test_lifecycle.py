"""Collection lifecycle on pgvector and PostgreSQL (the contract: tests/unit/store/test_lifecycle.py), and the
CLI's confirmations."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from store.lifecycle import Collections
from store.state.ledger.postgres import PostgresLedger
from tests.backends import make_store_factory, unique_name
from tests.settings_files import pushed_collection
from tests.unit.store.test_lifecycle import RECORDS, LifecycleContract
from tests.workers import run_cli, run_on_terminal


class TestPgvectorLifecycle(LifecycleContract):
    @pytest.fixture
    def collections(self, request: pytest.FixtureRequest, postgres_url: str) -> Iterator[Collections]:
        for make in make_store_factory(request, "pgvector"):
            ledger = PostgresLedger(postgres_url)
            yield Collections(make(dimensions=4), ledger)
            ledger.close()


def test_the_cli_creates_the_declared_ones_and_confirms_what_destroys(tmp_path: Path, postgres_url: str) -> None:
    from store.state.ledger.postgres import PostgresLedger
    from store.vectors.pgvector import PgvectorStore

    name = unique_name()
    config = pushed_collection(tmp_path, postgres_url, name, dimensions=4)
    init = run_cli(config, "init")
    assert init.returncode == 0, init.stderr
    assert f"created  {name}" in init.stdout and "state tables ready in postgresql" in init.stdout
    with PgvectorStore(postgres_url, dimensions=4) as store:
        store.get_collection(name).upsert_many(RECORDS)

    refused = run_cli(config, "collections", "reset", name)
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        f"error: emptying collection '{name}' needs confirmation and stdin is not a terminal: pass --yes"
    )
    emptied = run_cli(config, "collections", "reset", name, "--yes")
    assert emptied.returncode == 0, emptied.stderr
    assert f"emptied {name}: 3 chunks deleted, 0 ledger entries and 0 failures forgotten" in emptied.stdout

    ledger = PostgresLedger(postgres_url)
    ledger.record_failure(name, "r1", "boom")
    ledger.close()
    screen = run_on_terminal(config, "collections", "drop", name, answer="y")
    assert f"Drop collection '{name}' (0 chunks) and forget what the ledger holds of it? [y/N]" in screen
    assert f"dropped {name}: 0 chunks deleted, 0 ledger entries and 1 failure forgotten" in screen
    assert f"note: {name} is still declared in the settings" in screen
    with PgvectorStore(postgres_url, dimensions=4) as store:
        assert not store.has_collection(name)
