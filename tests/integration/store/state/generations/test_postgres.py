"""The generations registry contract (tests/unit/store/state/generations/test_base.py) on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store.state.generations import Generations
from store.state.generations.postgres import PostgresGenerations
from tests.unit.store.state.generations.test_base import GenerationsContract


class TestPostgresGenerations(GenerationsContract):
    @pytest.fixture
    def registry(self, postgres_url: str) -> Iterator[Generations]:
        made = PostgresGenerations(postgres_url)
        yield made
        made.close()
