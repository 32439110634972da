"""The memory backend, the reference: exact scores for each metric over the records a filter keeps, and BM25 as
the reference formula over the whole collection (the answers every backend shares: test_conformance.py)."""

from __future__ import annotations

import numpy as np
import pytest

from store.vectors.filters import Filter
from store.vectors.keyword import bm25
from store.vectors.memory import MemoryStore, scores
from store.vectors.records import VectorRecord
from tests.backends import keep_keywords


def test_scores_are_higher_is_closer_for_each_metric() -> None:
    matrix, query = np.array([[3.0, 4.0], [1.0, 0.0]]), np.array([1.0, 0.0])
    assert scores(matrix, query, "dot").tolist() == [3.0, 1.0]
    assert scores(matrix, query, "cosine") == pytest.approx([0.6, 1.0])
    assert scores(matrix, np.zeros(2), "euclidean") == pytest.approx([1 / 6, 0.5])


def test_a_search_is_exact_over_the_records_the_filter_keeps() -> None:
    notes = MemoryStore(dimensions=2, metric="dot").get_collection("notes", create=True)
    notes.upsert_many(VectorRecord(f"r{i}", [1.0, float(i)], metadata={"even": i % 2 == 0}) for i in range(10))
    assert [m.id for m in notes.search([0.0, 1.0], limit=3)] == ["r9", "r8", "r7"]
    assert [m.id for m in notes.search([0.0, 1.0], limit=3, filter=Filter.eq("even", True))] == ["r8", "r6", "r4"]


def test_keyword_scores_are_the_reference_bm25_over_the_collection() -> None:
    notes = keep_keywords(MemoryStore(dimensions=2)).get_collection("notes", create=True)
    texts = {"a": "renewal renewal call", "b": "renewal email", "c": "pricing call"}
    notes.upsert_many(VectorRecord(id, [1.0, 0.0], text) for id, text in texts.items())
    found = notes.search("renewal", mode="keyword")
    assert [m.id for m in found] == ["a", "b"]
    lengths = np.array([3.0, 2.0, 2.0])
    expected = bm25.term_weights(np.array([[2.0], [1.0], [0.0]]), lengths, float(lengths.mean())) * bm25.idf(2, 3)
    assert [m.score for m in found] == pytest.approx(expected[:2, 0].tolist())


def test_a_records_swap_finds_its_chunks_by_owner_as_the_filter_would() -> None:
    """``replace_records`` and the chunk reads go through the owner index; they take what ``record_id`` in the
    ids matches, also after a chunk id moved to another record and a delete."""
    notes = MemoryStore(dimensions=2).get_collection("notes", create=True)

    def chunk(id: str, owner: str) -> VectorRecord:
        return VectorRecord(id, [1.0, 0.0], f"text of {id}", metadata={"record_id": owner, "chunk": 0})

    notes.upsert_many([chunk("a:0", "a"), chunk("a:1", "a"), chunk("b:0", "b"), chunk("n:0", "n")])
    notes.upsert_many([chunk("a:1", "b")])  # the same chunk id, now b's
    assert sorted(c.id for c in notes.chunks_of("b")) == ["a:1", "b:0"]
    notes.replace_records(["a"], [chunk("a:2", "a")])
    assert sorted(r.id for r in notes._matching(None)) == ["a:1", "a:2", "b:0", "n:0"]
    notes.replace_records(["x"], [])  # no chunk of x: nothing goes
    assert notes.count() == 4
    notes.delete("b:0")
    assert [c.id for c in notes.chunks_of("b")] == ["a:1"]
    notes.replace_records(["b"], [])
    assert sorted(r.id for r in notes._matching(None)) == ["a:2", "n:0"]
