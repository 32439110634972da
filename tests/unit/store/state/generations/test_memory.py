"""The generations contract (test_base.py) on the memory registry, the reference."""

from __future__ import annotations

import pytest

from store.state.generations import Generations, MemoryGenerations
from tests.unit.store.state.generations.test_base import GenerationsContract


class TestMemoryGenerations(GenerationsContract):
    @pytest.fixture
    def registry(self) -> Generations:
        return MemoryGenerations()
