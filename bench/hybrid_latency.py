"""Hybrid against vector search latency at 100,000 chunks on pgvector (the quality bench's last rows).

The debian faq's real chunks, then synthetic filler up to ``total``: each filler chunk's text is 40 to 160
words drawn from the faq's own words by their frequency (so BM25 meets a real vocabulary and its long
tail), its vector a real chunk's vector plus Gaussian noise, normalised (clustered like real text, not
uniform). The faq's questions, embedded beforehand, are searched in the three modes taking turns, two rounds; the first
is a warm-up. What bounds the keyword leg is counted too: the rows holding at least one of a query's terms
(each has a posting the leg scores).
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from bench.embedding_cache import DiskEmbeddings
from bench.labelled_sets import LabelledSet, chunked
from bench.report import Row
from bench.targets import judged
from store.evaluation import percentile
from store.vectors import SearchMode, VectorRecord, VectorStore
from store.vectors.keyword.analyzer import Analyzer

__all__ = ["latency_rows"]

ROUNDS = 2
BATCH = 10_000
NOISE = 0.05  # per dimension: a filler vector's cosine to its seed is about 0.7


def filler(
    labelled: LabelledSet,
    chunks: list[tuple[str, str, str, int]],
    vectors: list[np.ndarray],
    count: int,
    seed: int = 20,
) -> list[VectorRecord]:
    """``count`` synthetic chunks over the set's words and near its vectors (record ids ``fill-N``)."""
    rng = np.random.default_rng(seed)
    words = Counter(w for text in labelled.records.values() for w in re.findall(r"[A-Za-z][\w'-]*", text))
    vocabulary = list(words)
    weights = np.array(list(words.values()), dtype=np.float64)
    lengths = rng.integers(40, 161, size=count)
    drawn = rng.choice(len(vocabulary), size=int(lengths.sum()), p=weights / weights.sum())
    ends = np.cumsum(lengths)
    base = np.stack(vectors)
    noisy = base[rng.integers(len(base), size=count)] + rng.normal(0, NOISE, (count, base.shape[1]))
    noisy = (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)
    return [
        VectorRecord(
            f"fill-{i}:0",
            noisy[i],
            " ".join(vocabulary[w] for w in drawn[end - size : end]),  # type: ignore[arg-type]
            {"record_id": f"fill-{i}", "chunk": 0},
        )
        for i, (size, end) in enumerate(zip(lengths, ends, strict=True))
    ]


def latency_rows(
    store: VectorStore, labelled: LabelledSet, embeddings: DiskEmbeddings, *, total: int, variant: object
) -> list[Row]:
    """Vector and hybrid p50/p95 over ``total`` chunks; the target: hybrid p95 <= 2x vector p95."""
    import time

    from bench.search_settings import weighted

    chunks = chunked(labelled)
    vectors = embeddings.embed_many([text for _, text, _, _ in chunks])
    name = "q_latency"
    if name in store.list_collections():
        store.drop_collection(name)
    collection = store.get_collection(name, create=True)
    collection.defer_index()
    collection.upsert_many(
        [
            VectorRecord(cid, v, text, {"record_id": rid, "chunk": n})  # type: ignore[arg-type]
            for (cid, text, rid, n), v in zip(chunks, vectors, strict=True)
        ]
    )
    rest = filler(labelled, chunks, vectors, total - len(chunks))
    for start in range(0, len(rest), BATCH):
        collection.upsert_many(rest[start : start + BATCH])
    collection.ensure_index()
    queries = [q.query for q in labelled.queries]
    embeddings.remember(queries)
    took: dict[SearchMode, list[float]] = {"vector": [], "keyword": [], "hybrid": []}
    rrf_k = getattr(variant, "rrf_k", None)
    with weighted(store, name, getattr(variant, "weights", None), **({} if rrf_k is None else {"rrf_k": rrf_k})):
        for number in range(ROUNDS):
            for query in queries:
                for mode in took:
                    began = time.perf_counter()
                    collection.search(query, limit=10, mode=mode)
                    if number:
                        took[mode].append((time.perf_counter() - began) * 1000)
    store.drop_collection(name)
    held = holding(collection.analyzer, [text for _, text, _, _ in chunks] + [r.text for r in rest], queries)
    vector95, keyword95, hybrid95 = (percentile(took[m], 95) for m in ("vector", "keyword", "hybrid"))
    section = f"quality latency {total:,} chunks"
    detail = f"{len(took['vector'])} searches each, pgvector, {getattr(variant, 'name', 'hybrid')}"
    return [
        Row(section, "vector p95", vector95, "ms", detail=f"p50 {percentile(took['vector'], 50):.2f} ms; {detail}"),
        Row(
            section,
            "keyword p95",
            keyword95,
            "ms",
            ratio=round(keyword95 / vector95, 3),
            detail=f"p50 {percentile(took['keyword'], 50):.2f} ms; {detail}",
        ),
        Row(
            section,
            "rows holding a query term, p95",
            percentile(held, 95),
            "rows",
            detail=f"p50 {percentile(held, 50):,.0f} rows of {total:,}: the keyword leg scores each",
        ),
        Row(
            section,
            "hybrid p95",
            hybrid95,
            "ms",
            ratio=round(hybrid95 / vector95, 3),
            **judged("hybrid p95 against vector", hybrid95 / vector95),
            detail=f"p50 {percentile(took['hybrid'], 50):.2f} ms; {detail}",
        ),
    ]


def holding(analyzer: Analyzer, texts: list[str], queries: list[str]) -> list[float]:
    """For each query, how many of ``texts`` hold at least one of its terms (the rows BM25 scores)."""
    postings: dict[str, list[int]] = {}
    for number, text in enumerate(texts):
        for term in set(analyzer.terms(text)):
            postings.setdefault(term, []).append(number)
    counts = []
    for query in queries:
        lists = [np.array(postings[t]) for t in analyzer.query_terms(query) if t in postings]
        counts.append(float(len(np.unique(np.concatenate(lists)))) if lists else 0.0)
    return counts
