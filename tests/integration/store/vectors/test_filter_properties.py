"""The filter properties (tests/unit/store/vectors/test_filter_properties.py) on pgvector, and on the Qdrant
server at VECTORSYNC_TEST_QDRANT_URL when it is set."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store import VectorStore
from tests.backends import SERVER_BACKENDS
from tests.unit.store.vectors.test_filter_properties import FilterProperties, make_store


class TestServerBackends(FilterProperties):
    @pytest.fixture(params=SERVER_BACKENDS, scope="class")
    @classmethod
    def store(cls, request: pytest.FixtureRequest) -> Iterator[VectorStore]:
        yield from make_store(request)
