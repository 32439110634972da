"""The ledger contract (test_base.py) on the memory ledger, the reference."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store.state.ledger import Ledger, MemoryLedger
from tests.unit.store.state.ledger.test_base import LedgerContract


class TestMemoryLedger(LedgerContract):
    @pytest.fixture
    def ledger(self) -> Iterator[Ledger]:
        made = MemoryLedger()
        yield made
        made.close()
