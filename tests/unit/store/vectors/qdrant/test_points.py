"""A Qdrant collection's points: their ids and payload, and QdrantContract, Qdrant's behaviour wherever it runs
(the contract every backend shares: tests/unit/store/vectors/test_conformance.py).

Runs on qdrant-client's local mode (in memory and in a folder); QdrantContract also runs against the server at
VECTORSYNC_TEST_QDRANT_URL when it is set (tests/integration/store/vectors/test_qdrant_server.py).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("qdrant_client")

from qdrant_client import QdrantClient

from store.vectors.base import Collection, Metric
from store.vectors.filters import Filter
from store.vectors.memory import MemoryStore
from store.vectors.qdrant import POINT_NAMESPACE, QdrantStore, point_id
from store.vectors.records import VectorRecord, text_digest

Open = Callable[..., Collection]


def opener(location: str) -> Iterator[Open]:
    """Open fresh collections of a QdrantStore at ``location``; each is dropped and closed afterwards."""
    stores: list[tuple[QdrantStore, str]] = []

    def open_(*, dimensions: int = 4, metric: Metric = "cosine") -> Collection:
        store = QdrantStore(location, dimensions=dimensions, metric=metric)
        name = f"t_{uuid.uuid4().hex[:12]}"
        stores.append((store, name))
        return store.get_collection(name, create=True)

    yield open_
    for store, name in stores:
        store.drop_collection(name)
        store.close()


def make_record(id: str, embedding: list[float], **metadata: object) -> VectorRecord:
    return VectorRecord(id=id, embedding=embedding, text=f"text of {id}", metadata=metadata)


def test_point_id_is_uuid5_of_the_record_id() -> None:
    assert point_id("notes:42") == str(uuid.uuid5(POINT_NAMESPACE, "notes:42"))
    assert point_id("notes:42") != point_id("notes:43")


def test_points_are_stored_under_their_uuid5_with_the_payload_layout(tmp_path: Path) -> None:
    folder = str(tmp_path / "qdrant")
    with QdrantStore(folder, dimensions=2) as store:
        store.get_collection("notes", create=True).upsert(
            VectorRecord(id="r1", embedding=[1, 0], text="t", metadata={"kind": "call"}, model="m")
        )
    client = QdrantClient(path=folder)
    try:
        [point] = client.retrieve("notes", [point_id("r1")])
    finally:
        client.close()
    assert point.payload == {
        "id": "r1",
        "text": "t",
        "text_hash": text_digest("t"),
        "model": "m",
        "metadata": {"kind": "call"},
    }


# -- typed filters -----------------------------------------------------------------------

TYPED_RECORDS: dict[str, dict[str, Any]] = {
    "int": {"x": 1},
    "float": {"x": 1.0},
    "true": {"x": True},
    "false": {"x": False},
    "zero": {"x": 0},
    "string": {"x": "1"},
    "list": {"x": [2, "a", True]},
    "null": {"x": None},
    "missing": {},
    "nested": {"owner": {"id": 1}},
}


def _dated(collection: Collection, total: int = 300, late: int = 8) -> None:
    """``total`` records; the ``late`` ones dated after October are the farthest from [1, 0, 0, 0]."""
    collection.upsert_many(
        make_record(
            f"r{i}",
            [1.0, i / 10, 0.0, 0.0],
            created_at="2026-10-02" if i >= total - late else "2026-09-15",
            kind="call" if i % 2 else "note",
        )
        for i in range(total)
    )


class QdrantContract:
    """Qdrant's behaviour wherever it runs; a subclass gives the ``open_collection`` fixture."""

    def test_ids_text_and_metadata_come_back_unchanged(self, open_collection: Open) -> None:
        collection = open_collection()
        metadata = {"id": "user field", "text": 7, "metadata": {"nested": [1, "x", None]}, "owner": {"id": "u1"}}
        record = VectorRecord(id="deal/ü 42:chunk#0", embedding=[1, 0, 0, 0], text="hello", metadata=metadata)
        collection.upsert(record)
        [match] = collection.search([1, 0, 0, 0])
        assert (match.id, match.text, match.metadata) == (record.id, "hello", metadata)
        assert collection.count(Filter.eq("owner.id", "u1") & Filter.eq("text", 7)) == 1

    def test_upsert_of_the_same_id_replaces_the_point(self, open_collection: Open) -> None:
        collection = open_collection()
        collection.upsert(make_record("a", [1, 0, 0, 0], v=1))
        collection.upsert(make_record("a", [0, 1, 0, 0], v=2))
        assert collection.count() == 1
        assert collection.search([0, 1, 0, 0])[0].metadata == {"v": 2}

    def test_upsert_many_writes_more_than_one_batch(self, open_collection: Open) -> None:
        collection = open_collection()
        collection.upsert_many(make_record(f"r{i}", [1, i, 0, 0], i=i) for i in range(600))
        assert collection.count() == 600
        assert collection.count(Filter.gte("i", 300)) == 300

    @pytest.mark.parametrize(
        ("metric", "expected"),
        [
            ("euclidean", 1 / (1 + 5.0)),  # distance from (0, 0) to (3, 4) is 5
            ("dot", 3.0),
            ("cosine", 0.6),
        ],
    )
    def test_scores_are_higher_is_closer(self, open_collection: Open, metric: Metric, expected: float) -> None:
        collection = open_collection(dimensions=2, metric=metric)
        collection.upsert_many([make_record("far", [3, 4]), make_record("near", [1, 0.001])])
        query = [1.0, 0.0] if metric != "euclidean" else [0.0, 0.0]
        matches = {m.id: m.score for m in collection.search(query)}
        assert matches["far"] == pytest.approx(expected, rel=1e-5)

    def test_euclidean_results_are_best_first(self, open_collection: Open) -> None:
        collection = open_collection(dimensions=2, metric="euclidean")
        collection.upsert_many([make_record(str(d), [float(d), 0.0]) for d in (3, 1, 2, 0)])
        matches = collection.search([0.0, 0.0], limit=4)
        assert [m.id for m in matches] == ["0", "1", "2", "3"]
        assert [m.score for m in matches] == pytest.approx([1.0, 0.5, 1 / 3, 0.25])

    @pytest.mark.parametrize(
        ("filter", "expected"),
        [
            (Filter.eq("x", 1), {"int", "float"}),
            (Filter.eq("x", 1.0), {"int", "float"}),
            (Filter.eq("x", True), {"true", "list"}),
            (Filter.eq("x", False), {"false"}),
            (Filter.eq("x", 0), {"zero"}),
            (Filter.eq("x", "1"), {"string"}),
            (Filter.eq("x", "a"), {"list"}),
            (Filter.eq("x", 2), {"list"}),
            (Filter.gte("x", 1), {"int", "float", "list"}),
            (Filter.lt("x", 1), {"zero"}),
            (Filter.gt("x", "0"), {"string", "list"}),
            (Filter.any_of("x", [True, 0]), {"true", "list", "zero"}),
            (~Filter.eq("x", 1), set(TYPED_RECORDS) - {"int", "float"}),
            (~Filter.eq("x", True), set(TYPED_RECORDS) - {"true", "list"}),
            (~Filter.gte("x", 1), set(TYPED_RECORDS) - {"int", "float", "list"}),
            (~Filter.gt("x", "0"), set(TYPED_RECORDS) - {"string", "list"}),
            (Filter.eq("owner.id", 1), {"nested"}),
            (Filter.eq("x", 1) | Filter.eq("x", "1"), {"int", "float", "string"}),
            (Filter.gte("x", 0) & ~Filter.eq("x", 0), {"int", "float", "list"}),
        ],
    )
    def test_filters_are_typed_like_filter_matches(
        self, open_collection: Open, filter: Filter, expected: set[str]
    ) -> None:
        collection = open_collection()
        collection.upsert_many(make_record(id, [1, 0, 0, 0], **meta) for id, meta in TYPED_RECORDS.items())
        found = {m.id for m in collection.search([1, 0, 0, 0], filter=filter, limit=100)}
        assert found == expected == {id for id, meta in TYPED_RECORDS.items() if filter.matches(meta)}
        assert collection.count(filter) == len(expected)

    def test_integers_beyond_float_precision_are_compared_exactly(self, open_collection: Open) -> None:
        big = 2**60
        collection = open_collection()
        collection.upsert_many([make_record("a", [1, 0, 0, 0], n=big), make_record("b", [1, 0, 0, 0], n=big + 1)])
        assert [m.id for m in collection.search([1, 0, 0, 0], filter=Filter.eq("n", big + 1))] == ["b"]
        assert collection.count(Filter.gt("n", big)) == 1

    def test_a_string_comparison_still_fills_limit(self, open_collection: Open) -> None:
        collection = open_collection()
        _dated(collection)
        matches = collection.search([1, 0, 0, 0], filter=Filter.gte("created_at", "2026-10-01"), limit=8)
        assert [m.id for m in matches] == [f"r{i}" for i in range(292, 300)]
        assert matches == sorted(matches, key=lambda m: -m.score)

    def test_a_string_comparison_next_to_native_parts_fills_limit(self, open_collection: Open) -> None:
        collection = open_collection()
        _dated(collection, late=20)
        where = Filter.eq("kind", "call") & Filter.gte("created_at", "2026-10-01")
        matches = collection.search([1, 0, 0, 0], filter=where, limit=8)
        assert [m.id for m in matches] == [f"r{i}" for i in range(281, 297, 2)]

    def test_a_string_comparison_returns_all_when_fewer_exist(self, open_collection: Open) -> None:
        collection = open_collection()
        _dated(collection, late=3)
        where = Filter.not_(Filter.lt("created_at", "2026-10-01"))
        assert len(collection.search([1, 0, 0, 0], filter=where, limit=8)) == 3

    def test_count_and_delete_where_with_a_string_comparison(self, open_collection: Open) -> None:
        collection = open_collection()
        _dated(collection, total=600, late=300)
        late = Filter.gt("created_at", "2026-10-01")
        assert collection.count(late) == 300
        assert collection.count(late & Filter.eq("kind", "call")) == 150
        collection.delete_where(late & Filter.eq("kind", "call"))
        assert collection.count() == 450
        assert collection.count(late) == 150

    def test_replace_where_swaps_the_matching_records(self, open_collection: Open) -> None:
        collection = open_collection()
        collection.upsert_many(
            [
                make_record("a:0", [1, 0, 0, 0], record_id="a"),
                make_record("a:1", [1, 0, 0, 0], record_id="a"),
                make_record("b:0", [1, 0, 0, 0], record_id="b"),
            ]
        )
        collection.replace_where(
            Filter.eq("record_id", "a"),
            [make_record("a:1", [0, 1, 0, 0], record_id="a", v=2), make_record("a:2", [0, 1, 0, 0], record_id="a")],
        )
        found = {m.id: m.metadata for m in collection.search([0, 1, 0, 0], limit=10)}
        assert set(found) == {"a:1", "a:2", "b:0"}
        assert found["a:1"] == {"record_id": "a", "v": 2}

    def test_replace_where_with_a_residual_filter_keeps_the_new_records(self, open_collection: Open) -> None:
        collection = open_collection()
        collection.upsert_many([make_record(f"old{i}", [1, 0, 0, 0], at="2026-10-05") for i in range(3)])
        collection.replace_where(Filter.gte("at", "2026-10-01"), [make_record("old1", [1, 0, 0, 0], at="2026-10-06")])
        assert [m.id for m in collection.search([1, 0, 0, 0])] == ["old1"]

    def test_answers_equal_the_memory_reference(self, open_collection: Open) -> None:
        records = [
            make_record(
                f"r{i}",
                [math.cos(i), math.sin(i), (i % 3) - 1.0, 0.5],
                n=i,
                half=i / 2,
                tag=["a", "b"][: i % 3],
                at=f"2026-{1 + i % 12:02d}-01",
                flag=i % 4 == 0,
            )
            for i in range(40)
        ]
        reference = MemoryStore(dimensions=4, metric="dot").get_collection("c", create=True)
        collection = open_collection(metric="dot")
        reference.upsert_many(records)
        collection.upsert_many(records)
        filters = [
            Filter.gte("n", 10) & Filter.lt("at", "2026-06-01"),
            Filter.eq("tag", "b") | Filter.eq("flag", True),
            ~Filter.any_of("tag", ["a", 3]) & Filter.lte("half", 7.5),
            Filter.from_dict({"$or": [{"at": {"$gt": "2026-10-01"}}, {"n": {"$in": [1, 2, 3]}}]}),
        ]
        query = [0.3, 0.9, -0.2, 0.1]
        for where in filters:
            expected = reference.search(query, filter=where, limit=5)
            found = collection.search(query, filter=where, limit=5)
            assert [m.id for m in found] == [m.id for m in expected], where
            assert [m.score for m in found] == pytest.approx([m.score for m in expected], rel=1e-5)
            assert collection.count(where) == reference.count(where)


class TestLocalMode(QdrantContract):
    @pytest.fixture(params=["memory", "folder"])
    def open_collection(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Open]:
        yield from opener(":memory:" if request.param == "memory" else str(tmp_path / "qdrant"))
