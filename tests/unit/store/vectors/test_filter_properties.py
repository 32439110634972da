"""Random filters over random metadata: pgvector and Qdrant select exactly what Filter.matches selects."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store import Filter, VectorRecord, VectorStore
from tests.backends import StoreFactory, make_store_factory, unique_name

FIELDS = ["kind", "n", "tags", "owner.id", "owner.score"]
strings = st.sampled_from(["a", "b", "B", "ab", "é", "2026-10-01", "2026-10-15", "1", ""])
numbers = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, -1.5, 2.0, 1e6]))
scalars = st.one_of(strings, numbers, st.booleans())
leaf = st.one_of(scalars, st.lists(scalars, max_size=3), st.none())


@st.composite
def metadata(draw: st.DrawFn) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for field in FIELDS:
        if draw(st.booleans()):
            head, _, tail = field.partition(".")
            if tail:
                owner = data.setdefault(head, {}) if draw(st.integers(0, 4)) else data.setdefault(head, "flat")
                if isinstance(owner, dict):
                    owner[tail] = draw(leaf)
            else:
                data[head] = draw(leaf)
    if draw(st.booleans()):
        data["record_id"] = draw(strings)  # reserved: a string when present, a column in pgvector
    return data


def leaves() -> st.SearchStrategy[Filter]:
    fields = st.sampled_from([*FIELDS, "record_id"])
    return st.one_of(
        st.builds(Filter.eq, fields, scalars),
        st.builds(Filter.any_of, fields, st.lists(scalars, min_size=1, max_size=3)),
        st.builds(Filter.gt, fields, st.one_of(strings, numbers)),
        st.builds(Filter.gte, fields, st.one_of(strings, numbers)),
        st.builds(Filter.lt, fields, st.one_of(strings, numbers)),
        st.builds(Filter.lte, fields, st.one_of(strings, numbers)),
    )


filters = st.recursive(
    leaves(),
    lambda inner: st.one_of(
        st.builds(Filter.not_, inner),
        st.builds(lambda a, b: a & b, inner, inner),
        st.builds(lambda a, b: a | b, inner, inner),
    ),
    max_leaves=6,
)


class FilterProperties:
    """The property every backend that translates filters keeps; a subclass gives the ``store`` fixture."""

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(records=st.lists(metadata(), min_size=1, max_size=25), filter=filters)
    def test_backend_selects_exactly_what_matches_selects(
        self, store: VectorStore, records: list[dict[str, Any]], filter: Filter
    ) -> None:
        collection = store.get_collection(unique_name(), create=True)
        try:
            collection.upsert_many(
                VectorRecord(str(i), [float(i), 1.0, 0.0, 0.0], "", meta) for i, meta in enumerate(records)
            )
            expected = sorted(str(i) for i, meta in enumerate(records) if filter.matches(meta))
            found = sorted(m.id for m in collection.search([0, 1, 0, 0], filter=filter, limit=100))
            assert found == expected, filter
            assert collection.count(filter) == len(expected)
        finally:
            store.drop_collection(collection.name)


def make_store(request: pytest.FixtureRequest) -> Iterator[VectorStore]:
    """One store of ``request.param``'s backend for a whole class of examples, closed afterwards."""
    factory: Iterator[StoreFactory] = make_store_factory(request, request.param)
    yield next(factory)(dimensions=4, metric="euclidean")
    next(factory, None)


class TestQdrantLocalMode(FilterProperties):
    @pytest.fixture(params=["qdrant"], scope="class")
    @classmethod
    def store(cls, request: pytest.FixtureRequest) -> Iterator[VectorStore]:
        yield from make_store(request)
