"""The ledger contract (tests/unit/store/state/ledger/test_base.py) on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store.state.ledger import Ledger
from store.state.ledger.postgres import PostgresLedger
from tests.unit.store.state.ledger.test_base import LedgerContract


class TestPostgresLedger(LedgerContract):
    escapes_unstorable_text = True

    @pytest.fixture
    def ledger(self, postgres_url: str) -> Iterator[Ledger]:
        made = PostgresLedger(postgres_url)
        yield made
        made.close()
