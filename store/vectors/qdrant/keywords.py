"""BM25 on Qdrant: a sparse vector per point, with Qdrant's IDF modifier supplying the idf at query time.

A point's sparse vector ``keywords`` holds, for each of its terms, the BM25 term weight
``tf * (K1 + 1) / (tf + K1 * (1 - B + B * len / avgdl))``; the query holds 1 for each distinct query term.
With ``Modifier.IDF`` Qdrant multiplies each query value by ``ln(1 + (N - df + 0.5) / (df + 0.5))`` over the
points that have the vector, so the dot product is the BM25 score (``store.vectors.keyword.bm25``). Points
with no term get no sparse vector, so ``N`` counts the records with a term, as on the other backends.

What differs: the length normalisation uses the ``avgdl`` the collection pinned (its metadata, key
``KEYWORDS_KEY``) when its first terms were written or last backfilled, not the live mean; and a term is its
32-bit hash (``term_index``), so two terms that collide share their statistics. A Qdrant server counts deleted
points in df until it optimises the segment (local mode does not).

A collection made before keyword search, or whose terms another analyzer made, gains the vector and its
points' weights from their stored text when it is opened (no re-embedding).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

from qdrant_client import QdrantClient, models

from store.vectors.keyword import Analyzer
from store.vectors.keyword.bm25 import term_weight

__all__ = [
    "KEYWORDS",
    "KEYWORDS_KEY",
    "backfill",
    "keyword_config",
    "pin",
    "pinned",
    "query_vector",
    "sparse_vector",
    "term_index",
    "upgrade",
]

#: The sparse vector's name.
KEYWORDS = "keywords"
#: The collection metadata key of the keyword settings: the analyzer that made the terms, the pinned avgdl.
KEYWORDS_KEY = "vectorsync_keywords"
#: Points read and rewritten per call during a backfill.
BACKFILL_PAGE = 256


def term_index(term: str) -> int:
    """A term's index in the sparse vectors: 32 bits of its BLAKE2b hash (Qdrant indices are unsigned 32-bit)."""
    return int.from_bytes(hashlib.blake2b(term.encode(), digest_size=4).digest(), "big")


def sparse_vector(counts: Counter[str], avgdl: float) -> models.SparseVector | None:
    """A document's BM25 term weights, or None when it has no term."""
    length = sum(counts.values())
    if not length:
        return None
    weights: dict[int, float] = {}
    for term, tf in counts.items():
        index = term_index(term)
        weights[index] = weights.get(index, 0.0) + term_weight(tf, length, avgdl)
    return models.SparseVector(indices=list(weights), values=list(weights.values()))


def query_vector(terms: list[str]) -> models.SparseVector:
    """1 for each distinct query term: Qdrant's IDF modifier weighs them."""
    indices = list(dict.fromkeys(term_index(t) for t in terms))
    return models.SparseVector(indices=indices, values=[1.0] * len(indices))


def keyword_config() -> models.SparseVectorParams:
    return models.SparseVectorParams(modifier=models.Modifier.IDF)


def pinned(client: QdrantClient, name: str) -> dict[str, Any]:
    """The collection's keyword settings (``analyzer``, ``avgdl``) from its metadata; {} when it has none."""
    found = (client.get_collection(name).config.metadata or {}).get(KEYWORDS_KEY)
    return dict(found) if isinstance(found, dict) else {}


def pin(client: QdrantClient, name: str, analyzer: Analyzer | None, avgdl: float | None) -> None:
    """Record the analyzer of the collection's terms (None: it keeps none) and the avgdl of their weights."""
    identity = analyzer.identity if analyzer is not None else None
    client.update_collection(name, metadata={KEYWORDS_KEY: {"analyzer": identity, "avgdl": avgdl}})


def upgrade(client: QdrantClient, name: str, analyzer: Analyzer | None) -> float | None:
    """Give collection ``name`` the keyword vector and terms by ``analyzer`` if it lacks them (a backfill from
    the stored text); return the avgdl its weights use (None: no term written yet). With no analyzer (the
    collection keeps no keyword index) its points' keyword vectors are deleted, once."""
    sparse = client.get_collection(name).config.params.sparse_vectors or {}
    found = pinned(client, name)
    if analyzer is None:
        if KEYWORDS in sparse and found.get("analyzer") is not None:
            client.delete_vectors(name, vectors=[KEYWORDS], points=models.FilterSelector(filter=models.Filter()))
            pin(client, name, None, None)
        return None
    if KEYWORDS in sparse and found.get("analyzer") == analyzer.identity:
        avgdl = found.get("avgdl")
        return float(avgdl) if avgdl else None
    if KEYWORDS not in sparse:
        client.create_vector_name(
            name,
            KEYWORDS,
            models.SparseVectorNameConfig(sparse=models.SparseVectorConfig(modifier=models.Modifier.IDF)),
        )
    return backfill(client, name, analyzer)


def backfill(client: QdrantClient, name: str, analyzer: Analyzer) -> float | None:
    """Weigh every point's stored text again (two passes: the mean length, then the weights); pin the avgdl."""
    lengths = [sum(counts.values()) for _, counts in _analyzed(client, name, analyzer)]
    with_terms = [n for n in lengths if n]
    avgdl = sum(with_terms) / len(with_terms) if with_terms else None
    if avgdl is not None:
        page: list[tuple[Any, Counter[str]]] = []
        for point in _analyzed(client, name, analyzer):
            page.append(point)
            if len(page) >= BACKFILL_PAGE:
                _rewrite(client, name, page, avgdl)
                page = []
        _rewrite(client, name, page, avgdl)
    pin(client, name, analyzer, avgdl)
    return avgdl


def _analyzed(client: QdrantClient, name: str, analyzer: Analyzer) -> Iterator[tuple[Any, Counter[str]]]:
    offset: Any = None
    while True:
        points, offset = client.scroll(
            name, limit=BACKFILL_PAGE, offset=offset, with_payload=["text"], with_vectors=False
        )
        for point in points:
            yield point.id, analyzer.frequencies(str((point.payload or {}).get("text", "")))
        if offset is None:
            return


def _rewrite(client: QdrantClient, name: str, page: list[tuple[Any, Counter[str]]], avgdl: float) -> None:
    weighed = [(id, sparse_vector(counts, avgdl)) for id, counts in page]
    updates = [models.PointVectors(id=id, vector={KEYWORDS: vector}) for id, vector in weighed if vector is not None]
    if updates:
        client.update_vectors(name, points=updates, wait=True)
    empty = [id for id, vector in weighed if vector is None]
    if empty:
        client.delete_vectors(name, vectors=[KEYWORDS], points=models.PointIdsList(points=empty), wait=True)
