"""Keyword and hybrid search latency on pgvector against vector search, on the same rows and queries.

    flock /tmp/heavy.lock .venv/bin/python -m bench.keyword_latency [--rows 100000] [--queries 200]

The issue's target: hybrid p95 at most 2x vector p95 at 100,000 chunks. Chunks are real text: runs of 40 to
160 words of Python's docstrings (a Zipf-like vocabulary, identifiers included), with clustered 384-d vectors;
a query is 2 to 5 words drawn from one chunk, so common words are as common in queries as in the text. The
query's vector comes from a hash of its text (no model: embedding would cost both modes alike).
``run(quick)`` returns the rows for ``bench.report``; it is not in ``bench/__main__``'s sections.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from bench.report import Row, print_table
from bench.servers import database
from bench.targets import judged
from store import Filter, VectorRecord
from store.vectors.pgvector import PgvectorStore

DIMENSIONS = 384
CENTRES = 500
#: The modes measured, in order: vector is the baseline.
MODES = ("vector", "keyword", "hybrid")


def _words() -> list[str]:
    import collections
    import json
    import os
    import pathlib
    import typing

    text = " ".join(
        str(getattr(obj, "__doc__", "") or "")
        for module in (os, collections, json, typing, pathlib)
        for obj in (module, *vars(module).values())
    )
    return re.findall(r"\S+", text)


class HashEmbedder:
    """A text's vector: a centre picked by its hash, plus noise seeded by it (stands in for a model)."""

    def __init__(self, centres: np.ndarray) -> None:
        self.centres = centres

    def embed(self, text: str) -> Sequence[float]:
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
        rng = np.random.default_rng(seed)
        vector = self.centres[rng.integers(len(self.centres))] + 0.35 * rng.standard_normal(DIMENSIONS)
        return list(vector / np.linalg.norm(vector))


def chunks(count: int, rng: np.random.Generator) -> list[str]:
    words = _words()
    starts = rng.integers(0, len(words) - 200, count)
    lengths = rng.integers(40, 160, count)
    return [" ".join(words[s : s + n]) for s, n in zip(starts, lengths, strict=True)]


def queries(texts: list[str], count: int, rng: np.random.Generator) -> list[str]:
    found: list[str] = []
    while len(found) < count:
        words = [w for w in re.findall(r"[A-Za-z_][\w.-]+", texts[int(rng.integers(len(texts)))]) if len(w) > 3]
        if len(words) >= 2:
            found.append(" ".join(rng.choice(words, size=min(len(words), int(rng.integers(2, 6))), replace=False)))
    return found


def timed(collection: Any, texts: list[str], mode: str, filter: Filter | None) -> list[float]:
    for text in texts[:20]:  # warm the caches
        collection.search(text, mode=mode, filter=filter)
    seconds = []
    for text in texts:
        started = time.perf_counter()
        collection.search(text, mode=mode, filter=filter)
        seconds.append(time.perf_counter() - started)
    return seconds


def p95(values: list[float]) -> float:
    return float(np.percentile(values, 95)) * 1000


def run(quick: bool = False, *, rows: int | None = None, count: int | None = None) -> list[Row]:
    rows = rows or (10_000 if quick else 100_000)
    count = count or (50 if quick else 200)
    rng = np.random.default_rng(20)
    centres = rng.standard_normal((CENTRES, DIMENSIONS))
    texts = chunks(rows, rng)
    vectors = centres[rng.integers(0, CENTRES, rows)] + 0.35 * rng.standard_normal((rows, DIMENSIONS))
    records = [
        VectorRecord(f"c{i}", v, t, {"bucket": i % 100}) for i, (v, t) in enumerate(zip(vectors, texts, strict=True))
    ]
    asked = queries(texts, count, rng)
    found: list[Row] = []
    with database() as url:
        store = PgvectorStore(url, dimensions=DIMENSIONS, embedder=HashEmbedder(centres))
        try:
            collection = store.get_collection("keyword_latency", create=True)
            started = time.perf_counter()
            collection.upsert_many(records)
            load = time.perf_counter() - started
            found.append(Row("keyword", f"load {rows:,} chunks (COPY, analyzer, indexes)", load, "s"))
            for label, filter in (("", None), (" 1% filter", Filter.eq("bucket", 7))):
                base = p95(timed(collection, asked, "vector", filter))
                for mode in MODES:
                    value = base if mode == "vector" else p95(timed(collection, asked, mode, filter))
                    row = Row("keyword", f"{mode} p95{label}, {rows:,} chunks", value, "ms", ratio=value / base)
                    if mode == "hybrid":
                        row = replace(row, **judged("hybrid p95 against vector", value / base))
                    found.append(row)
        finally:
            store.drop_collection("keyword_latency")
            store.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    arguments = parser.parse_args()
    print_table(run(rows=arguments.rows, count=arguments.queries))


if __name__ == "__main__":
    main()
