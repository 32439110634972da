"""Filtered search on pgvector: recall@10 and latency at selectivities 100% to 0.01%, and the bulk-load limit.

    .venv/bin/python -m bench.filtered_search [--sizes 100000,1000000] [--queries 100]

Vectors are clustered (uniform random vectors make HNSW recall meaningless);
the filter fields are independent of the clusters, the hard case for HNSW.
A second set is real text: paragraphs of Python's documentation embedded by
the bundled local model. Ground truth is an exact numpy search of the same rows. The load is the raw
limit: binary COPY into an empty table, then the HNSW build.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from bench.report import Row, print_table
from bench.servers import database
from bench.targets import judged
from store import Filter, VectorRecord
from store.vectors.pgvector import PgvectorStore
from store.vectors.pgvector.table import PgvectorCollection

DIMENSIONS = 384
#: Selectivity label -> metadata field whose value splits the rows into that many equal parts.
SELECTIVITIES = {
    "100%": ("tenant", 1),
    "10%": ("s10", 10),
    "1%": ("s100", 100),
    "0.1%": ("s1k", 1_000),
    "0.01%": ("s10k", 10_000),
}


def clustered(count: int, rng: np.random.Generator, centres: int = 500) -> np.ndarray:
    """Unit vectors around ``centres`` random centres, as float32."""
    middle = rng.standard_normal((centres, DIMENSIONS)).astype(np.float32)
    vectors = middle[rng.integers(0, centres, count)] + 0.35 * rng.standard_normal((count, DIMENSIONS), np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


#: Modules whose docstrings are the real-text set (with Python's help topics).
TEXT_MODULES = (
    "os",
    "collections",
    "itertools",
    "functools",
    "typing",
    "asyncio",
    "json",
    "re",
    "pathlib",
    "subprocess",
    "logging",
    "argparse",
    "datetime",
    "decimal",
    "email",
    "unittest",
    "sqlite3",
    "socket",
    "threading",
    "multiprocessing",
    "inspect",
    "ast",
    "dataclasses",
    "enum",
    "statistics",
    "random",
    "textwrap",
    "shutil",
    "tempfile",
    "zipfile",
    "tarfile",
    "csv",
    "configparser",
    "hashlib",
    "ssl",
    "selectors",
    "struct",
    "codecs",
    "io",
    "pickle",
    "heapq",
    "types",
    "contextlib",
    "math",
    "calendar",
    "locale",
    "traceback",
    "warnings",
    "pdb",
    "doctest",
    "pydoc",
    "numpy",
    "sqlalchemy",
    "celery",
    "kombu",
    "redis",
    "pydantic",
    "psycopg",
    "httpx",
    "openai",
    "tenacity",
)


def _docstrings(module: object) -> Iterator[str]:
    for value in list(vars(module).values()):
        for obj in (value, *(list(vars(value).values()) if isinstance(value, type) else ())):
            doc = getattr(obj, "__doc__", None)
            if isinstance(doc, str):
                yield doc


def paragraphs(count: int) -> list[str]:
    """Real English text: paragraphs of Python's help topics and of well-known modules' docstrings."""
    import importlib
    import pydoc_data.topics

    texts = list(pydoc_data.topics.topics.values())
    for name in TEXT_MODULES:
        try:
            texts += _docstrings(importlib.import_module(name))
        except ImportError:
            continue
    found = (p.strip() for text in texts for p in text.split("\n\n"))
    return list(dict.fromkeys(p for p in found if len(p) >= 60))[:count]


def embedded_text(count: int) -> np.ndarray:
    """``count`` paragraphs embedded by the bundled local model (all-MiniLM-L6-v2, 384-d, unit length)."""
    from sentence_transformers import SentenceTransformer

    from store.embeddings.providers.local import model_location

    model = SentenceTransformer(model_location("all-MiniLM-L6-v2"), device="cpu")
    texts = paragraphs(count)
    vectors = model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    return np.asarray(vectors, dtype=np.float32)


def _metadata(i: int) -> dict[str, Any]:
    return {field: i % parts for field, parts in SELECTIVITIES.values()}


def _records(vectors: np.ndarray) -> Iterator[VectorRecord]:
    for i, vector in enumerate(vectors):
        yield VectorRecord(f"v{i}", vector, "", _metadata(i))  # type: ignore[arg-type]


def load(store: PgvectorStore, name: str, vectors: np.ndarray) -> tuple[float, float]:
    """Binary COPY into an empty table, then the HNSW build: seconds for each."""
    collection = store.get_collection(name, create=True)
    assert isinstance(collection, PgvectorCollection)
    collection.defer_index()
    start = time.perf_counter()
    with store.transaction() as conn:
        raw = conn.connection.driver_connection
        collection.copy_rows(raw, collection.table.name, list(_records(vectors)))  # type: ignore[arg-type]
    copied = time.perf_counter() - start
    start = time.perf_counter()
    collection.ensure_index()
    return copied, time.perf_counter() - start


def truth(vectors: np.ndarray, query: np.ndarray, mask: np.ndarray | None, k: int = 10) -> set[str]:
    """The ids of the exact ``k`` nearest rows (cosine) among those ``mask`` keeps."""
    scores = vectors @ query
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    best = np.argpartition(-scores, k)[:k]
    return {f"v{i}" for i in best if np.isfinite(scores[i])}


def measure(store: PgvectorStore, name: str, vectors: np.ndarray, queries: np.ndarray, label: str) -> list[Row]:
    """Recall@10 and latency of the search at every selectivity, and unfiltered."""
    collection = store.get_collection(name, create=True)
    size = f"{len(vectors):,}"
    index = np.arange(len(vectors))
    rows: list[Row] = []
    latency = "search p95, up to 100,000 vectors" if len(vectors) <= 100_000 else "search p95, 1,000,000 vectors"
    cases: list[tuple[str, str | None, int]] = [("none", None, 1), *((s, f, p) for s, (f, p) in SELECTIVITIES.items())]
    for selectivity, field, parts in cases:
        timings, recalls = [], []
        for j, query in enumerate(queries):
            value = j % parts
            where = None if field is None else Filter.eq(field, value)
            mask = None if field is None else (index % parts == value)
            expected = truth(vectors, query, mask)
            start = time.perf_counter()
            found = collection.search(query.tolist(), filter=where, limit=10)
            timings.append((time.perf_counter() - start) * 1000)
            recalls.append(len(expected & {m.id for m in found}) / max(1, len(expected)))
        recall = statistics.mean(recalls)
        p50, p95 = statistics.median(timings), float(np.percentile(timings, 95))
        what = "no filter" if field is None else f"filter {selectivity}"
        goal = "search recall" if field is None else "filtered recall"
        section = f"search {label} {size}"
        rows.append(Row(section, f"{what}: recall@10", recall, "", **judged(goal, recall)))
        rows.append(
            Row(
                section,
                f"{what}: p50 / p95",
                p95,
                "ms p95",
                detail=f"p50 {p50:.1f} ms",
                **judged(latency, p95),
            )
        )
    return rows


def run(
    quick: bool = False,
    sizes: tuple[int, ...] = (100_000, 1_000_000),
    queries: int = 100,
    folder: Path | None = None,
    text_rows: int = 12_000,
) -> list[Row]:
    """Every figure of this section, on one database."""
    if quick:
        sizes, queries, text_rows = (20_000,), 30, 2_000
    rng = np.random.default_rng(1)
    rows: list[Row] = []
    with database(folder) as url:
        store = PgvectorStore(url, dimensions=DIMENSIONS)
        for size in sizes:
            vectors = clustered(size + queries, rng)
            held_out, vectors = vectors[size:], vectors[:size]
            name = f"clustered_{size}"
            copied, built = load(store, name, vectors)
            rows.append(
                Row(
                    f"load {size:,}",
                    "raw COPY, then HNSW build (the limit)",
                    copied + built,
                    "s",
                    detail=f"COPY {copied:.1f} s + build {built:.1f} s",
                )
            )
            rows += measure(store, name, vectors, held_out, "clustered")
            store.drop_collection(name)
        if text_rows:
            vectors = embedded_text(text_rows + queries)
            held_out, vectors = vectors[-queries:], vectors[:-queries]
            load(store, "text", vectors)
            rows += measure(store, "text", vectors, held_out, "real text")
            store.drop_collection("text")
        store.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--text-rows", type=int, default=12_000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    rows = run(args.quick, sizes, args.queries, text_rows=args.text_rows)
    print_table(rows)


if __name__ == "__main__":
    main()
