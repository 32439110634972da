"""The conformance suite (tests/unit/store/vectors/test_conformance.py) on the backends behind a server:
pgvector, and the Qdrant server at VECTORSYNC_TEST_QDRANT_URL when it is set."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store import ConfigError, VectorRecord
from tests.backends import SERVER_BACKENDS, StoreFactory, make_store_factory, unique_name
from tests.unit.store.vectors.test_conformance import VectorStoreContract


class TestServerBackends(VectorStoreContract):
    @pytest.fixture(params=SERVER_BACKENDS)
    def make_store(self, request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
        yield from make_store_factory(request, request.param)


# In-process stores (memory, Qdrant :memory:) share nothing; tests/unit/store/vectors/qdrant/test_store.py reopens a
# folder.
@pytest.mark.parametrize("kind", SERVER_BACKENDS)
def test_an_existing_collection_of_another_size_is_refused(request: pytest.FixtureRequest, kind: str) -> None:
    make_store = next(make_store_factory(request, kind))
    name = unique_name()
    make_store(dimensions=4).get_collection(name, create=True).upsert(VectorRecord("a", [1, 0, 0, 0]))
    with pytest.raises(ConfigError, match=r"4.*8.*vectors\.dimensions|8.*4.*vectors\.dimensions") as error:
        make_store(dimensions=8).get_collection(name, create=True)
    assert name in str(error.value)
