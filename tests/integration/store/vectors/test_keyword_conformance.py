"""The keyword suite (tests/unit/store/vectors/test_keyword_conformance.py) on the backends behind a server
(pgvector's own keyword statistics: pgvector/test_keywords.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.backends import SERVER_BACKENDS, StoreFactory, make_store_factory
from tests.unit.store.vectors.test_keyword_conformance import (
    KeywordContract,
)


class TestServerBackends(KeywordContract):
    @pytest.fixture(params=SERVER_BACKENDS)
    def make_store(self, request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
        yield from make_store_factory(request, request.param)
