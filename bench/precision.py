"""halfvec against vector, measured: HNSW build, index size, recall@10 and p95 latency per ``vectors.precision``.

    .venv/bin/python -m bench --only precision [--quick]

The data is the search section's ``clustered()`` (384-d, 500 centres) with held-out queries of the same
distribution and an exact numpy truth (``bench.hnsw_sweep.exact``); 1,000,000 vectors, 20,000 with ``--quick``.
Each precision loads a table of its own by binary COPY, then builds its HNSW index through the store's own path
at the default ``hnsw_m`` and ``hnsw_ef_construction`` (``bench.hnsw_sweep.build``: the build's cost in the server's
CPU seconds, with the memory a real build gets), and searches at the default ``ef_search`` after a pass at 40
that also warms the cache. The index size is ``pg_relation_size`` of the HNSW index. Each ``half`` row carries its
ratio to the ``float`` row of the same measure.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Literal

import numpy as np
import sqlalchemy as sa

from bench.filtered_search import DIMENSIONS, clustered
from bench.hnsw_sweep import DEFAULT_EF_SEARCH, build, checked, exact, load, searched
from bench.report import Row
from bench.servers import database
from store.settings import VectorSettings, default
from store.vectors.pgvector import PgvectorStore, PgvectorTuning
from store.vectors.pgvector.schema import bulk_indexes
from store.vectors.pgvector.table import PgvectorCollection

__all__ = ["run"]

Precision = Literal["float", "half"]
PRECISIONS: tuple[Precision, ...] = ("float", "half")
HNSW_M: int = default(VectorSettings, "hnsw_m")
HNSW_EF_CONSTRUCTION: int = default(VectorSettings, "hnsw_ef_construction")
#: The narrow search, run first: its recall is in the detail, and it brings the index into shared buffers.
WARM_EF_SEARCH = 40


@dataclass(frozen=True)
class Measured:
    """What one precision's table gave."""

    copied: float
    build_cpu: float
    build_wall: float
    spilled: list[str]
    index_mb: float
    table_mb: float
    recall: float
    warm_recall: float
    timings: list[float]
    check: str


def _other_indexes(store: PgvectorStore, name: str) -> None:
    """Build the indexes a bulk load defers besides HNSW (GINs, text hashes), so the timed build is HNSW's alone."""
    collection = store.get_collection(name, create=True)
    assert isinstance(collection, PgvectorCollection)
    with store.transaction() as conn:
        for index in bulk_indexes(collection.table):
            if not str(index.name).endswith("_embedding_idx"):
                index.create(conn, checkfirst=True)


def _sizes(store: PgvectorStore, name: str) -> tuple[float, float]:
    """MB of the HNSW index (``pg_relation_size``) and of the table (``pg_table_size``: heap and TOAST)."""
    table = store.schema.table(name).name
    query = sa.text("SELECT pg_relation_size(to_regclass(:i)), pg_table_size(to_regclass(:t))")
    with store.transaction() as conn:
        index, heap = conn.execute(query, {"i": f"{table}_embedding_idx", "t": table}).one()
    return index / 2**20, heap / 2**20


def measure(
    url: str, precision: Precision, vectors: np.ndarray, queries: np.ndarray, expected: list[set[str]]
) -> Measured:
    """Load, build and search one table of ``precision``; the table is dropped afterwards."""
    name = f"precision_{precision}_{len(vectors)}"
    loader = PgvectorStore(url, dimensions=DIMENSIONS, tuning=PgvectorTuning(precision=precision))
    try:
        copied = load(loader, name, vectors)
        _other_indexes(loader, name)
    finally:
        loader.close()
    store, wall, cpu, notices = build(url, name, HNSW_M, HNSW_EF_CONSTRUCTION, precision=precision)
    try:
        in_plan, ef_search = checked(store, name, queries[0])
        warm_recall, _ = searched(store, name, queries, expected, WARM_EF_SEARCH)
        recall, timings = searched(store, name, queries, expected, DEFAULT_EF_SEARCH)
        index_mb, table_mb = _sizes(store, name)
        store.drop_collection(name)
    finally:
        store.close()
    check = f"plan {'HNSW index' if in_plan else '**not the index**'}, ef_search {ef_search}"
    spilled = [n for n in notices if "maintenance_work_mem" in n]
    return Measured(copied, cpu, wall, spilled, index_mb, table_mb, recall, warm_recall, timings, check)


def rows_of(size: int, found: dict[Precision, Measured]) -> list[Row]:
    """Four rows a precision: build, index size, recall, latency; the half rows with their ratio to float."""
    base = found["float"]
    rows = []
    for precision, m in found.items():

        def ratio(value: float, of_float: float, precision: Precision = precision) -> float | None:
            return value / of_float if precision != "float" and of_float else None

        section = f"precision {size:,}"
        p50, p95 = statistics.median(m.timings), float(np.percentile(m.timings, 95))
        base_p95 = float(np.percentile(base.timings, 95))
        fit = m.spilled[0] if m.spilled else "graph in memory"
        rows += [
            Row(
                section,
                f"{precision}: HNSW build",
                m.build_cpu,
                "CPU s",
                ratio=ratio(m.build_cpu, base.build_cpu),
                detail=f"wall {m.build_wall:.1f} s; COPY {m.copied:.1f} s; {fit}",
            ),
            Row(
                section,
                f"{precision}: HNSW index size",
                m.index_mb,
                "MB",
                ratio=ratio(m.index_mb, base.index_mb),
                detail=f"table {m.table_mb:,.0f} MB (pg_table_size)",
            ),
            Row(
                section,
                f"{precision}: recall@10",
                m.recall,
                "",
                ratio=ratio(m.recall, base.recall),
                detail=f"ef_search {DEFAULT_EF_SEARCH}; {WARM_EF_SEARCH}: {m.warm_recall:.3f}; {m.check}",
            ),
            Row(
                section,
                f"{precision}: p50 / p95",
                p95,
                "ms p95",
                ratio=ratio(p95, base_p95),
                detail=f"p50 {p50:.1f} ms; {len(m.timings)} queries",
            ),
        ]
    return rows


def run(quick: bool = False, sizes: tuple[int, ...] = (1_000_000,), queries: int = 100) -> list[Row]:
    """Every figure of this section, on one database: each size once per precision, float first."""
    if quick:
        sizes, queries = (20_000,), 30
    rows: list[Row] = []
    with database() as url:
        for size in sizes:
            vectors = clustered(size + queries, np.random.default_rng(1))
            held_out, vectors = vectors[size:], vectors[:size]
            expected = exact(vectors, held_out)
            found = {p: measure(url, p, vectors, held_out, expected) for p in PRECISIONS}
            rows += rows_of(size, found)
    return rows
