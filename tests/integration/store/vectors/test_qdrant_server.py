"""The Qdrant contract (tests/unit/store/vectors/qdrant/test_points.py) against the server at
VECTORSYNC_TEST_QDRANT_URL; skipped when it is not set."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.unit.store.vectors.qdrant.test_points import Open, QdrantContract, opener

SERVER_URL = os.environ.get("VECTORSYNC_TEST_QDRANT_URL")


@pytest.mark.skipif(not SERVER_URL, reason="VECTORSYNC_TEST_QDRANT_URL is not set")
class TestServer(QdrantContract):
    @pytest.fixture
    def open_collection(self) -> Iterator[Open]:
        assert SERVER_URL is not None
        yield from opener(SERVER_URL)
