"""One suite, every backend: the same calls must give the same answers on memory, pgvector and Qdrant.

Here on the backends that run in this process (memory, Qdrant's local mode); the same suite runs on pgvector
and a Qdrant server in tests/integration/store/vectors/test_conformance.py."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

import pytest

from store import Collection, ConfigError, Filter, VectorRecord
from store.vectors.records import text_digest
from store.vectors.stored import HASHES_PER_READ
from tests.backends import IN_PROCESS_BACKENDS, StoreFactory, make_store_factory, unique_name

PEOPLE = [
    VectorRecord(
        "a",
        [1, 0, 0, 0],
        "alpha",
        {"kind": "call", "n": 1, "owner": {"id": "u1"}, "tags": ["x", "y"], "at": "2026-10-01", "ok": True},
    ),
    VectorRecord(
        "b",
        [0.9, 0.1, 0, 0],
        "beta",
        {"kind": "call", "n": 2.5, "owner": {"id": "u2"}, "tags": ["y"], "at": "2026-10-15", "ok": False},
    ),
    VectorRecord("c", [0, 1, 0, 0], "gamma", {"kind": "email", "n": 3, "owner": {"id": "u1"}, "at": "2026-11-01"}),
    VectorRecord("d", [0, 0, 1, 0], "delta", {"kind": "email", "n": "3", "tags": "x"}),
    VectorRecord("e", [0, 0, 0, 1], "epsilon", {"kind": "note", "ok": 1}),
    VectorRecord("f", [0.5, 0.5, 0.5, 0.5], "phi", {}),
]


def ids(collection: Collection, filter: Filter | None = None) -> list[str]:
    return sorted(m.id for m in collection.search([1, 1, 1, 1], filter=filter, limit=100))


# -- filters ---------------------------------------------------------------------------

FILTER_CASES = [
    (Filter.eq("kind", "call"), ["a", "b"]),
    (Filter.eq("n", 3), ["c"]),  # the string "3" is not the number 3
    (Filter.eq("n", "3"), ["d"]),
    (Filter.eq("n", 2.5), ["b"]),
    (Filter.eq("n", 1.0), ["a"]),  # 1 == 1.0
    (Filter.eq("ok", True), ["a"]),  # booleans are not numbers
    (Filter.eq("ok", 1), ["e"]),
    (Filter.eq("tags", "x"), ["a", "d"]),  # a list matches when one element does
    (Filter.eq("owner.id", "u1"), ["a", "c"]),
    (Filter.any_of("kind", ["email", "note"]), ["c", "d", "e"]),
    (Filter.any_of("n", [1, "3"]), ["a", "d"]),
    (Filter.gt("n", 1), ["b", "c"]),
    (Filter.gte("n", 1), ["a", "b", "c"]),
    (Filter.lt("n", 3), ["a", "b"]),
    (Filter.lte("n", 3), ["a", "b", "c"]),
    (Filter.gte("at", "2026-10-15"), ["b", "c"]),  # RFC 3339 dates compare as strings
    (Filter.lt("at", "2026-10-15"), ["a"]),
    (Filter.gt("n", "2"), ["d"]),  # strings only with strings
    (Filter.not_(Filter.eq("kind", "call")), ["c", "d", "e", "f"]),
    (~Filter.eq("owner.id", "u1"), ["b", "d", "e", "f"]),  # missing fields match a negation
    (~Filter.gt("n", 1), ["a", "d", "e", "f"]),
    (~Filter.eq("tags", "y"), ["c", "d", "e", "f"]),
    (Filter.eq("kind", "call") & Filter.eq("owner.id", "u1"), ["a"]),
    (Filter.eq("kind", "note") | Filter.eq("owner.id", "u2"), ["b", "e"]),
    (~(Filter.eq("kind", "call") | Filter.eq("kind", "email")), ["e", "f"]),
    (Filter.gte("n", 1) & ~Filter.eq("tags", "y"), ["c"]),
    (Filter.from_dict({"kind": "call", "at": {"$gte": "2026-10-10"}}), ["b"]),
    (Filter.from_dict({"$or": [{"kind": "note"}, {"n": {"$lt": 2}}]}), ["a", "e"]),
    (Filter.from_dict({"kind": {"$nin": ["call", "email"]}}), ["e", "f"]),
    (Filter.from_dict({"kind": {"$ne": "call"}, "n": {"$in": [3, "3"]}}), ["c", "d"]),
    (Filter.eq("missing.deeply", "x"), []),
]


class VectorStoreContract:
    """The suite every backend passes; a subclass runs it on the backends its ``make_store`` fixture builds."""

    @pytest.fixture
    def notes(self, make_store: StoreFactory) -> Collection:
        return make_store(dimensions=4).get_collection(unique_name(), create=True)

    @pytest.fixture
    def people(self, notes: Collection) -> Collection:
        notes.upsert_many(PEOPLE)
        return notes

    def test_upsert_then_search_returns_text_and_metadata(self, notes: Collection) -> None:
        notes.upsert(VectorRecord("n1", [1, 0, 0, 0], "hello", {"kind": "note", "owner": {"id": 7}}))
        [match] = notes.search([1, 0, 0, 0])
        assert (match.id, match.text, match.metadata) == ("n1", "hello", {"kind": "note", "owner": {"id": 7}})
        assert match.score == pytest.approx(1.0, abs=1e-6)

    def test_chunks_of_returns_a_records_chunks_in_order_and_nothing_of_others(self, notes: Collection) -> None:
        chunks = [
            VectorRecord(f"r1:{i}", [1, 0, 0, i], f"part {i}", {"record_id": "r1", "chunk": i}, model="m1")
            for i in (1, 0)
        ]
        notes.replace_records(["r1", "r2"], [*chunks, VectorRecord("r2:0", [0, 1, 0, 0], "other", {"record_id": "r2"})])
        found = notes.chunks_of("r1")
        assert [(c.id, c.chunk, c.text, c.model) for c in found] == [
            ("r1:0", 0, "part 0", "m1"),
            ("r1:1", 1, "part 1", "m1"),
        ]
        assert notes.chunks_of("r3") == []
        notes.replace_records(["r1"], [])
        assert notes.chunks_of("r1") == []

    def test_vectors_by_hash_finds_a_models_vector_of_a_text_whatever_record_holds_it(self, notes: Collection) -> None:
        notes.replace_records(
            ["r1", "r2", "r3"],
            [
                VectorRecord("r1:0", [1, 0, 0, 0], "kept", {"record_id": "r1", "chunk": 0}, model="m1"),
                VectorRecord("r1:1", [0, 0.6, 0.8, 0], "also", {"record_id": "r1", "chunk": 1}, model="m1"),
                VectorRecord("r2:0", [0, 1, 0, 0], "backup", {"record_id": "r2", "chunk": 0}, model="m2"),
                VectorRecord("r3:0", [0, 0, 1, 0], "kept", {"record_id": "r3", "chunk": 0}, model="m2"),
                VectorRecord("loose", [0, 0, 0, 1], "café 東京", {}, model="m1"),
            ],
        )
        wanted = [text_digest(t) for t in ("kept", "also", "backup", "café 東京", "never stored")]
        found = notes.vectors_by_hash(wanted, model="m1")
        assert set(found) == {text_digest("kept"), text_digest("also"), text_digest("café 東京")}
        assert found[text_digest("also")] == pytest.approx([0, 0.6, 0.8, 0], abs=1e-6)
        assert found[text_digest("café 東京")] == pytest.approx([0, 0, 0, 1], abs=1e-6)  # a record of no record_id
        assert notes.vectors_by_hash(wanted, model="m2") == {
            text_digest("backup"): pytest.approx([0, 1, 0, 0], abs=1e-6),
            text_digest("kept"): pytest.approx([0, 0, 1, 0], abs=1e-6),
        }
        assert notes.vectors_by_hash(wanted, model="m9") == {} and notes.vectors_by_hash([], model="m1") == {}
        notes.replace_records(["r1"], [])
        assert set(notes.vectors_by_hash(wanted, model="m1")) == {text_digest("café 東京")}

    def test_vectors_by_hash_reads_many_hashes_in_bounded_reads(self, notes: Collection) -> None:
        texts = [f"text {i}" for i in range(HASHES_PER_READ + 7)]
        notes.upsert_many(VectorRecord(f"t{i}", [1, 0, 0, i], t, {}, model="m1") for i, t in enumerate(texts))
        found = notes.vectors_by_hash([text_digest(t) for t in reversed(texts)], model="m1")
        last = found[text_digest(texts[-1])]  # Qdrant keeps cosine's vectors normalised: compare a ratio
        assert len(found) == len(texts) and last[3] / last[0] == pytest.approx(len(texts) - 1)

    def test_vectors_by_hash_refuses_what_is_no_text_hash(self, notes: Collection) -> None:
        message = "text hash 'kept' is not a sha256 of a chunk's text as 64 lower-case hex digits: make it with "
        with pytest.raises(ConfigError, match=re.escape(message + "store.vectors.records.text_digest(text)")):
            notes.vectors_by_hash(["kept"], model="m1")
        with pytest.raises(ConfigError, match="not a single string"):
            notes.vectors_by_hash(text_digest("kept"), model="m1")

    def test_chunk_digests_hash_each_chunks_text_and_page_the_record_ids(self, notes: Collection) -> None:
        chunks = [
            VectorRecord(f"r{r}:{i}", [1, 0, 0, i], f"part {i}", {"record_id": f"r{r}", "chunk": i}, model="m1")
            for r in (1, 2, 3)
            for i in range(r)
        ]
        notes.replace_records(["r1", "r2", "r3"], chunks)
        found = notes.chunk_digests(["r2", "r1", "r9"])
        assert [(c.id, c.record_id, c.chunk, c.text_hash, c.model) for c in found] == [
            ("r1:0", "r1", 0, text_digest("part 0"), "m1"),
            ("r2:0", "r2", 0, text_digest("part 0"), "m1"),
            ("r2:1", "r2", 1, text_digest("part 1"), "m1"),
        ]
        assert {c.dimensions for c in found} <= {4, None}  # None: a backend that does not say (Qdrant)
        assert notes.chunk_digests([]) == []
        try:
            first = notes.record_ids_page(after=None, limit=2)
        except NotImplementedError:
            return
        assert first == [("r1", 1), ("r2", 2)]
        assert notes.record_ids_page(after="r2", limit=2) == [("r3", 3)]
        assert notes.keyword_drift() == 0

    def test_upsert_replaces_a_record_with_the_same_id(self, notes: Collection) -> None:
        notes.upsert(VectorRecord("n1", [1, 0, 0, 0], "old", {"v": 1}))
        notes.upsert(VectorRecord("n1", [0, 1, 0, 0], "new", {"v": 2}))
        assert notes.count() == 1
        [match] = notes.search([0, 1, 0, 0])
        assert (match.text, match.metadata) == ("new", {"v": 2})

    def test_upsert_many_keeps_the_last_of_a_repeated_id(self, notes: Collection) -> None:
        written = notes.upsert_many([VectorRecord("x", [1, 0, 0, 0], "first"), VectorRecord("x", [1, 0, 0, 0], "last")])
        assert written == 1
        assert [m.text for m in notes.search([1, 0, 0, 0])] == ["last"]

    def test_search_orders_best_first_and_honours_limit(self, people: Collection) -> None:
        matches = people.search([1, 0, 0, 0], limit=3)
        assert [m.id for m in matches] == ["a", "b", "f"]
        assert matches[0].score >= matches[1].score >= matches[2].score

    def test_delete_removes_one_record_and_ignores_unknown_ids(self, people: Collection) -> None:
        people.delete("a")
        people.delete("no-such-id")
        assert ids(people) == ["b", "c", "d", "e", "f"]

    def test_delete_where_removes_exactly_the_matches(self, people: Collection) -> None:
        people.delete_where(Filter.eq("kind", "email"))
        assert ids(people) == ["a", "b", "e", "f"]

    def test_replace_where_swaps_the_matching_set(self, notes: Collection) -> None:
        notes.upsert_many(
            [
                VectorRecord("r1:0", [1, 0, 0, 0], "old 0", {"record_id": "r1", "chunk": 0}),
                VectorRecord("r1:1", [1, 0, 0, 0], "old 1", {"record_id": "r1", "chunk": 1}),
                VectorRecord("r2:0", [0, 1, 0, 0], "other", {"record_id": "r2", "chunk": 0}),
            ]
        )
        notes.replace_where(
            Filter.eq("record_id", "r1"),
            [
                VectorRecord("r1:0", [0, 0, 1, 0], "new 0", {"record_id": "r1", "chunk": 0}),
            ],
        )
        assert ids(notes) == ["r1:0", "r2:0"]
        assert [m.text for m in notes.search([0, 0, 1, 0], filter=Filter.eq("record_id", "r1"))] == ["new 0"]

    def test_replace_where_with_no_records_empties_the_set(self, notes: Collection) -> None:
        notes.upsert(VectorRecord("r1:0", [1, 0, 0, 0], "", {"record_id": "r1"}))
        notes.replace_where(Filter.eq("record_id", "r1"), [])
        assert notes.count() == 0

    def test_count_with_and_without_filter(self, people: Collection) -> None:
        assert people.count() == 6
        assert people.count(Filter.eq("kind", "call")) == 2
        assert people.count(Filter.eq("kind", "nothing")) == 0

    def test_store_lists_ensures_and_drops_collections(self, make_store: StoreFactory) -> None:
        store = make_store(dimensions=4)
        name = unique_name()
        first = store.ensure_collection(name)
        first.upsert(VectorRecord("a", [1, 0, 0, 0]))
        assert store.ensure_collection(name).count() == 1  # idempotent, keeps data
        assert name in store.list_collections()
        store.drop_collection(name)
        assert name not in store.list_collections()
        assert store.get_collection(name, create=True).count() == 0

    def test_reset_empties_a_collection_and_keeps_it_reset_and_get_refuse_a_missing_one(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store(dimensions=4)
        name = unique_name()
        for refused in (store.reset_collection, store.get_collection):
            with pytest.raises(ConfigError, match=f"collection '{name}' does not exist"):
                refused(name)
        assert not store.has_collection(name)
        notes = store.ensure_collection(name)
        notes.upsert_many(PEOPLE)
        store.reset_collection(name)
        assert notes.count() == 0 and store.get_collection(name).count() == 0 and store.has_collection(name)
        notes.upsert_many(PEOPLE[:3])
        assert ids(notes, Filter.eq("kind", "call")) == ["a", "b"]

    @pytest.mark.parametrize(("filter", "expected"), FILTER_CASES, ids=[repr(f) for f, _ in FILTER_CASES])
    def test_filter_selects_the_same_records_everywhere(
        self, people: Collection, filter: Filter, expected: list[str]
    ) -> None:
        assert sorted(r.id for r in PEOPLE if filter.matches(r.metadata)) == expected  # the in-memory truth
        assert ids(people, filter) == expected
        assert people.count(filter) == len(expected)

    def test_filters_apply_inside_the_search_not_after(self, notes: Collection) -> None:
        # The nearest 50 records are all "far"; the 8 matching ones are the farthest of all.
        near = [VectorRecord(f"n{i}", [1, 0.01 * i, 0, 0], "", {"kind": "far"}) for i in range(50)]
        wanted = [VectorRecord(f"w{i}", [0, 0, 1, 0.01 * i], "", {"kind": "wanted"}) for i in range(8)]
        notes.upsert_many(near + wanted)
        matches = notes.search([1, 0, 0, 0], filter=Filter.eq("kind", "wanted"), limit=8)
        assert sorted(m.id for m in matches) == sorted(r.id for r in wanted)

    def test_unheld_fields_are_the_fields_no_record_holds_a_value_for(self, people: Collection) -> None:
        assert people.unheld_fields(["kind", "owner_id", "owner.id", "tags", "owner.name", "kind", "ok"]) == (
            "owner_id",
            "owner.name",
        )
        people.upsert(VectorRecord("g", [0, 1, 1, 0], "gone", {"blank": None, "none": [], "zero": 0, "no": False}))
        assert people.unheld_fields(["blank", "none", "zero", "no", "kind"]) == ("blank", "none")
        assert people.unheld_fields([]) == ()
        with pytest.raises(ConfigError, match=r"^filter field 'owner id' is not allowed"):
            people.unheld_fields(["owner id"])

    def test_an_empty_collection_holds_no_field(self, notes: Collection) -> None:
        assert notes.unheld_fields(["kind", "owner.id"]) == ("kind", "owner.id")

    def test_delete_where_with_a_combined_filter(self, people: Collection) -> None:
        people.delete_where(Filter.eq("kind", "email") | Filter.lt("n", 2))
        assert ids(people) == ["b", "e", "f"]

    @pytest.mark.parametrize(
        ("metric", "query", "vector", "expected"),
        [
            ("cosine", [1, 2, 3, 4], [1, 2, 3, 4], 1.0),
            ("cosine", [1, 0, 0, 0], [0, 1, 0, 0], 0.0),
            ("cosine", [1, 0, 0, 0], [-1, 0, 0, 0], -1.0),
            ("cosine", [1, 0, 0, 0], [1, 1, 0, 0], 1 / math.sqrt(2)),
            ("dot", [1, 2, 0, 0], [3, 4, 0, 0], 11.0),
            ("euclidean", [0, 0, 0, 0], [3, 4, 0, 0], 1 / (1 + 5)),
            ("euclidean", [1, 1, 1, 1], [1, 1, 1, 1], 1.0),
        ],
    )
    def test_score_for_each_metric(
        self, make_store: StoreFactory, metric: str, query: list[float], vector: list[float], expected: float
    ) -> None:
        collection = make_store(dimensions=4, metric=metric).get_collection(unique_name(), create=True)
        collection.upsert(VectorRecord("v", vector))
        [match] = collection.search(query)
        assert match.score == pytest.approx(expected, abs=1e-5)

    @pytest.mark.parametrize("metric", ["cosine", "dot", "euclidean"])
    def test_higher_score_is_closer(self, make_store: StoreFactory, metric: str) -> None:
        collection = make_store(dimensions=4, metric=metric).get_collection(unique_name(), create=True)
        collection.upsert_many([VectorRecord("near", [1, 0.1, 0, 0]), VectorRecord("far", [0.1, 1, 0, 0])])
        near, far = collection.search([1, 0, 0, 0])
        assert (near.id, far.id) == ("near", "far")
        assert near.score > far.score

    def test_min_score_drops_weaker_matches(self, people: Collection) -> None:
        matches = people.search([1, 0, 0, 0], min_score=0.5)
        assert [m.id for m in matches] == ["a", "b", "f"]
        assert all(m.score >= 0.5 for m in matches)
        assert people.search([1, 0, 0, 0], min_score=1.1) == []

    @pytest.mark.parametrize("name", ["notes; DROP TABLE vs_x", "Notes", "a-b", "1abc", "", '"x"', "a" * 49])
    def test_collection_names_carrying_sql_are_rejected(self, make_store: StoreFactory, name: str) -> None:
        with pytest.raises(ConfigError, match=r"collection name .* is not allowed: use 1-48 lower-case letters"):
            make_store(dimensions=4).get_collection(name, create=True)

    def test_a_vector_of_the_wrong_size_names_both_sizes_and_writes_nothing(self, notes: Collection) -> None:
        good = VectorRecord("good", [1, 0, 0, 0])
        bad = VectorRecord("bad", [1, 0, 0, 0, 0])
        with pytest.raises(ConfigError) as error:
            notes.upsert_many([good, bad])
        assert str(error.value) == (
            f"embedding of record 'bad' has 5 dimensions; collection '{notes.name}' expects 4 (vectors.dimensions)"
        )
        assert notes.count() == 0
        with pytest.raises(ConfigError, match="query vector has 3 dimensions"):
            notes.search([1, 0, 0])

    @pytest.mark.parametrize(
        ("metadata", "message"),
        [
            (["kind", "call"], "is a list, not a JSON object"),
            ("kind=call", "is a str, not a JSON object"),
            ({"n": float("nan")}, "cannot be encoded as JSON"),
            ({"when": object()}, "cannot be encoded as JSON"),
            ({"tags": {1, 2}}, "cannot be encoded as JSON"),
            ({1: "x"}, "cannot be encoded as JSON"),
            ({"record_id": 5}, "'record_id' of record 'r' is 5; it is reserved for a str"),
        ],
    )
    def test_bad_metadata_is_rejected_and_nothing_is_written(
        self, notes: Collection, metadata: object, message: str
    ) -> None:
        notes.upsert(VectorRecord("keep", [1, 0, 0, 0], "kept", {"v": 1}))
        replacement = [VectorRecord("ok", [1, 0, 0, 0]), VectorRecord("r", [0, 1, 0, 0], "", metadata)]  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match=message):
            notes.upsert_many(replacement)
        with pytest.raises(ConfigError, match=message):
            notes.replace_where(Filter.eq("v", 1), replacement)
        assert [m.id for m in notes.search([1, 0, 0, 0])] == ["keep"]

    def test_nul_characters_and_lone_surrogates_are_dropped_from_values_and_refused_in_keys(
        self, notes: Collection
    ) -> None:
        """A key losing its NUL could merge with another key, and key order chose which value survived."""
        notes.upsert(VectorRecord("n1", [1, 0, 0, 0], "a\x00b\ud800c", {"who": "d\x00a\udfffna"}))
        [match] = notes.search([1, 0, 0, 0])
        assert (match.text, match.metadata) == ("abc", {"who": "dana"})
        with pytest.raises(ConfigError, match=r"key 'x\\\\x00y' holds a NUL character"):
            notes.upsert(VectorRecord("n2", [1, 0, 0, 0], "b", {"x\x00y": 1}))
        assert [m.id for m in notes.search([1, 0, 0, 0])] == ["n1"]

    def test_all_zero_vector_under_cosine_is_refused(self, notes: Collection) -> None:
        with pytest.raises(ConfigError, match="is all zeros: cosine similarity is undefined"):
            notes.upsert(VectorRecord("z", [0, 0, 0, 0]))

    def test_bad_search_arguments(self, people: Collection) -> None:
        with pytest.raises(ConfigError, match="limit 0 is not allowed"):
            people.search([1, 0, 0, 0], limit=0)
        with pytest.raises(ConfigError, match="filter must be a Filter"):
            people.search([1, 0, 0, 0], filter={"kind": "call"})  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="a text query needs embeddings"):
            people.search("hello")


class TestInProcessBackends(VectorStoreContract):
    @pytest.fixture(params=IN_PROCESS_BACKENDS)
    def make_store(self, request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
        yield from make_store_factory(request, request.param)
