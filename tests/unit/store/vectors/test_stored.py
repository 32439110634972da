"""StoredVectors, the pipeline's reuse, over memory collections (the reference backend); the reads themselves are
in the conformance suite (``test_conformance.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from store.errors import StoreUnavailable
from store.vectors.memory import MemoryCollection
from store.vectors.records import VectorRecord, text_digest
from store.vectors.stored import StoredVectors


def collection(*texts: str, model: str = "m1") -> MemoryCollection:
    held = MemoryCollection("notes", dimensions=2, metric="cosine")
    held.upsert_many(VectorRecord(f"{model}-{i}", [1, i + 1], t, {}, model=model) for i, t in enumerate(texts))
    return held


class Counting(MemoryCollection):
    def __init__(self, inner: MemoryCollection, *, fail: bool = False) -> None:
        super().__init__("counted", dimensions=2, metric="cosine")
        self.inner, self.fail, self.asked = inner, fail, []

    def vectors_by_hash(self, hashes: Any, *, model: str) -> dict[str, list[float]]:
        self.asked.append(list(hashes))
        if self.fail:
            raise StoreUnavailable("down")
        return self.inner.vectors_by_hash(hashes, model=model)


def test_a_text_is_found_in_its_own_collection_then_in_the_others_and_asked_for_once() -> None:
    own = Counting(collection("a", "b"))
    other = Counting(collection("b", "c"))
    reuse = StoredVectors(own, model="m1", others=lambda: [other])
    found = reuse(["a", "b", "c", "d"])
    assert found == {"a": [1, 1], "b": [1, 2], "c": [1, 2]}  # "b" from its own collection, not the other's
    assert own.asked == [[text_digest(t) for t in "abcd"]]
    assert other.asked == [[text_digest("c"), text_digest("d")]]  # only what its own lacks
    assert reuse(["a", "d", "c"]) == {"a": [1, 1], "c": [1, 2]}
    assert len(own.asked) == len(other.asked) == 1  # nothing asked twice


def test_others_are_not_asked_when_their_own_collection_holds_every_text() -> None:
    asked: list[int] = []
    reuse = StoredVectors(collection("a"), model="m1", others=lambda: asked.append(1) or [])
    assert reuse(["a"]) == {"a": [1, 1]} and asked == []


def test_another_models_vectors_are_never_taken() -> None:
    reuse = StoredVectors(collection("a", model="m2"), model="m1", others=lambda: [collection("b", model="m2")])
    assert reuse(["a", "b"]) == {}


def test_a_first_load_reads_no_own_collection_and_an_other_that_is_down_is_passed_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    down, up = Counting(collection("a"), fail=True), collection("a")
    reuse = StoredVectors(None, model="m1", others=lambda: [down, up])
    assert reuse(["a"]) == {"a": [1, 1]}
    assert down.asked == [[text_digest("a")]] and "those texts are embedded" in caplog.text
