"""Qdrant's keyword vector (store/vectors/qdrant/keywords.py): a collection made before keyword search gains
it from its stored text, without embedding; another analyzer's weights are made again."""

from __future__ import annotations

from qdrant_client import models

from store import VectorRecord
from store.settings import SearchSettings
from store.vectors.qdrant import QdrantStore
from store.vectors.qdrant.keywords import KEYWORDS, pinned
from store.vectors.qdrant.points import point_id
from tests.unit.store.vectors.test_keyword_conformance import (
    DIMENSIONS,
    QUERIES,
    WordsEmbedder,
    corpus,
    overlap,
    reference_bm25,
)


def test_a_collection_from_before_keyword_search_gains_it_without_embedding() -> None:
    embedder, records = WordsEmbedder(), corpus()
    store = QdrantStore(":memory:", dimensions=DIMENSIONS, embedder=embedder)
    client = store._client
    # As the release before keyword search made it: one unnamed vector, no sparse vector, no metadata.
    params = models.VectorParams(size=DIMENSIONS, distance=models.Distance.COSINE)
    client.create_collection("old", vectors_config=params)
    client.upsert(
        "old",
        points=[
            models.PointStruct(
                id=point_id(r.id),
                vector=list(r.embedding),
                payload={"id": r.id, "text": r.text, "model": "", "metadata": r.metadata},
            )
            for r in records
        ],
        wait=True,
    )
    store.configure_search("old", SearchSettings(keywords=True))
    collection = store.get_collection("old", create=True)
    assert KEYWORDS in (client.get_collection("old").config.params.sparse_vectors or {})
    assert pinned(client, "old")["analyzer"] == "english/1"
    for query in QUERIES[:6]:
        expected = [id for id, _ in reference_bm25(records, query)[:10]]
        assert overlap([m.id for m in collection.search(query, mode="keyword", limit=10)], expected) >= 0.9
    assert embedder.calls == 0
    assert collection.count() == len(records)
    store.close()


def test_another_language_weighs_the_stored_text_again() -> None:
    store = QdrantStore(":memory:", dimensions=DIMENSIONS)
    store.configure_search("notes", SearchSettings(keywords=True))
    collection = store.get_collection("notes", create=True)
    collection.upsert_many([*corpus(40), VectorRecord("x", [1.0] * DIMENSIONS, "the configured options")])
    assert [m.id for m in collection.search("configuring", mode="keyword")] == ["x"]  # english: "configur"
    store.set_rules("notes", language="simple")
    assert pinned(store._client, "notes")["analyzer"] == "simple/1"
    assert (
        store.get_collection("notes", create=True).search("configuring", mode="keyword") == []
    )  # simple: words as they are
    assert [m.id for m in store.get_collection("notes", create=True).search("the", mode="keyword")] == [
        "x"
    ]  # no stop words
    store.close()
