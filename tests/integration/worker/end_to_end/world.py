"""The system one end-to-end test drives: its settings file, source table, fake provider and helpers; the fixtures
that make it are in this folder's conftest.py."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from store.broker.producer import Producer
from store.settings import Settings
from store.state.ledger.postgres import PostgresLedger
from tests.crm import CrmTable, expected_chunks, stored_chunks
from tests.fake_openai import FakeOpenAI
from tests.workers import run_cli

__all__ = ["World", "reindex_and_wait"]


@dataclass
class World:
    """One test's system: its settings file, source table, fake provider and helpers."""

    config: Path
    settings: Settings
    collection: str
    crm: CrmTable
    openai: FakeOpenAI
    database: str

    @property
    def table(self) -> str:
        return self.settings.vectors.table_prefix + self.collection

    def producer(self) -> Producer:
        return Producer(self.settings)

    def expected(self) -> dict[str, tuple[str, dict[str, object]]]:
        return expected_chunks(self.settings, self.collection, self.crm.rows())

    def stored(self) -> dict[str, tuple[str, dict[str, object]]]:
        return stored_chunks(self.database, self.table)

    def in_sync(self) -> bool:
        return self.stored() == self.expected()

    def ledger(self) -> PostgresLedger:
        return PostgresLedger(self.database)


def reindex_and_wait(world: World, *extra: str) -> subprocess.CompletedProcess[str]:
    """``vectorsync reindex COLLECTION --wait EXTRA``, which ends done (0) or with failed records (1)."""
    result = run_cli(world.config, "reindex", world.collection, "--wait", *extra)
    assert result.returncode in (0, 1), result.stderr
    return result
