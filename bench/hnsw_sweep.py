"""HNSW build parameters by measurement: build time, recall@10 and latency per (hnsw_m, hnsw_ef_construction).

    .venv/bin/python -m bench.hnsw_sweep [--sizes 100000,1000000] [--grid 16x64,32x64] [--queries 100]

The vectors are ``bench.filtered_search.clustered()`` (384-d, 500 centres); the queries are new points of
the same distribution and the ground truth is an exact numpy search. Each size is loaded once by binary COPY;
each setting drops the HNSW index and builds it through the store's own path (``ensure_index``: the memory
and parallel workers the store gives a build), so the build times compare in one run, as ratios to m 16,
ef_construction 64 (pgvector's own defaults, and vectorsync's until this sweep). Search runs at the default
``ef_search``; recall at 40 and 1000 (pgvector's largest) is in the row's detail, as is a check of the
measurement: the plan uses the HNSW index, the transaction's ``hnsw.ef_search`` is the store's, and the graph
fitted in memory (pgvector says when not).
Standalone, the rows are merged into ``bench/results.json`` (part ``hnsw``), keeping every other row.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import sqlalchemy as sa
from psycopg import sql

from bench.filtered_search import clustered
from bench.report import Row, print_table, write_json
from bench.servers import database
from bench.targets import judged
from store import VectorRecord
from store.settings import VectorSettings, default
from store.vectors.pgvector import PgvectorStore, PgvectorTuning
from store.vectors.pgvector.building import build_memory_mb
from store.vectors.pgvector.table import PgvectorCollection

DIMENSIONS = 384
BASELINE = (16, 64)
#: The 100,000-vector grid (builds of seconds); larger sizes take the few settings it points to.
SMALL_GRID = tuple((m, ef) for m in (16, 24, 32) for ef in (64, 128, 200))
LARGE_GRID = (BASELINE, (16, 128), (16, 200))
DEFAULT_EF_SEARCH: int = default(VectorSettings, "ef_search")
OTHER_EF_SEARCH = (40, 1000)
COPY_BATCH = 50_000


def exact(vectors: np.ndarray, queries: np.ndarray, k: int = 10) -> list[set[str]]:
    """The ids of each query's ``k`` nearest rows by cosine (the vectors are unit length)."""
    found = []
    for scores in queries @ vectors.T:
        found.append({f"v{i}" for i in np.argpartition(-scores, k)[:k]})
    return found


def neighbour_gap(vectors: np.ndarray, queries: np.ndarray) -> float:
    """Median difference in cosine similarity between each query's 10th and 11th nearest rows."""
    gaps = []
    for scores in queries @ vectors.T:
        top = np.sort(np.partition(-scores, 11)[:11])
        gaps.append(float(top[10] - top[9]))
    return statistics.median(gaps)


def load(store: PgvectorStore, name: str, vectors: np.ndarray) -> float:
    """Binary COPY into an empty table with no HNSW index yet: seconds."""
    collection = store.get_collection(name, create=True)
    assert isinstance(collection, PgvectorCollection)
    collection.defer_index()
    start = time.perf_counter()
    with store.transaction() as conn:
        raw = conn.connection.driver_connection
        for first in range(0, len(vectors), COPY_BATCH):
            batch = [VectorRecord(f"v{i}", vectors[i]) for i in range(first, min(first + COPY_BATCH, len(vectors)))]
            collection.copy_rows(raw, collection.table.name, batch)  # type: ignore[arg-type]
    return time.perf_counter() - start


def server_cpu(store: PgvectorStore) -> float:
    """CPU seconds the PostgreSQL server has used so far: its processes, and those it has reaped (build workers).

    Wall time on a shared machine depends on the other processes; a build's CPU time does not."""
    with store.transaction() as conn:
        backend = int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())
    postmaster = int(_stat(backend)[1])
    ticks = sum(float(_stat(postmaster)[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        with contextlib.suppress(OSError, IndexError):
            fields = _stat(pid)
            if int(fields[1]) == postmaster:
                ticks += float(fields[11]) + float(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat after the command name: state, ppid, ... (utime is [11], stime [12])."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def build(
    url: str, name: str, m: int, ef_construction: int, *, precision: Literal["float", "half"] = "float"
) -> tuple[PgvectorStore, float, float, list[str]]:
    """A store with these HNSW parameters (and ``vectors.precision``), its index on ``name`` rebuilt: the store,
    wall and server CPU seconds, server notices."""
    tuning = PgvectorTuning(hnsw_m=m, hnsw_ef_construction=ef_construction, precision=precision)
    store = PgvectorStore(url, dimensions=DIMENSIONS, tuning=tuning)
    notices: list[str] = []
    sa.event.listen(
        store.engine,
        "connect",
        lambda dbapi, _record: dbapi.add_notice_handler(lambda d: notices.append(d.message_primary)),
    )
    collection = store.get_collection(name, create=True)
    assert isinstance(collection, PgvectorCollection)
    with store.transaction() as conn:
        conn.execute(sa.text(f'DROP INDEX IF EXISTS "{collection.table.name}_embedding_idx"'))
    cpu, start = server_cpu(store), time.perf_counter()
    collection.ensure_index()
    wall = time.perf_counter() - start
    return store, wall, server_cpu(store) - cpu, notices


def checked(store: PgvectorStore, name: str, query: np.ndarray) -> tuple[bool, int]:
    """Whether the search's plan walks the HNSW index, and the ``hnsw.ef_search`` its transaction runs with."""
    collection = store.get_collection(name, create=True)
    assert isinstance(collection, PgvectorCollection)
    table = collection.table.name
    with store.transaction() as conn:
        store.tune_search(conn)
        raw = conn.connection.driver_connection
        explain = sql.SQL("EXPLAIN SELECT id FROM {} ORDER BY embedding <=> %s LIMIT 10").format(sql.Identifier(table))
        plan = "\n".join(r[0] for r in raw.execute(explain, (store.schema.adapt(query),)).fetchall())  # type: ignore[union-attr]
        ef_search = int(conn.execute(sa.text("SHOW hnsw.ef_search")).scalar_one())
    return f"{table}_embedding_idx" in plan and "Seq Scan" not in plan, ef_search


def searched(
    store: PgvectorStore, name: str, queries: np.ndarray, expected: list[set[str]], ef_search: int
) -> tuple[float, list[float]]:
    """Mean recall@10 and the latency of each query (ms) at ``ef_search``."""
    collection = store.get_collection(name, create=True)
    store.ef_search = ef_search
    recalls, timings = [], []
    for query, truth in zip(queries, expected, strict=True):
        start = time.perf_counter()
        found = collection.search(query.tolist(), limit=10)
        timings.append((time.perf_counter() - start) * 1000)
        recalls.append(len(truth & {m.id for m in found}) / len(truth))
    store.ef_search = DEFAULT_EF_SEARCH
    return statistics.mean(recalls), timings


def measure(
    url: str,
    name: str,
    size: int,
    m: int,
    ef_construction: int,
    queries: np.ndarray,
    expected: list[set[str]],
    baseline: float | None,
) -> list[Row]:
    """Build with (m, ef_construction), then the three rows of that setting."""
    store, wall, built, notices = build(url, name, m, ef_construction)
    try:
        in_plan, ef_search = checked(store, name, queries[0])
        # the widest search first: it also brings the index into shared buffers before the timed pass
        others = {ef: searched(store, name, queries, expected, ef)[0] for ef in sorted(OTHER_EF_SEARCH, reverse=True)}
        recall, timings = searched(store, name, queries, expected, DEFAULT_EF_SEARCH)
    finally:
        store.close()
    spilled = [n for n in notices if "maintenance_work_mem" in n]
    memory = build_memory_mb(size, dimensions=DIMENSIONS, m=m)
    section, what = f"hnsw {size:,}", f"m {m}, ef_construction {ef_construction}"
    fit = spilled[0] if spilled else "graph in memory"
    check = f"plan {'HNSW index' if in_plan else '**not the index**'}, ef_search {ef_search}"
    p50, p95 = statistics.median(timings), float(np.percentile(timings, 95))
    return [
        Row(
            section,
            f"{what}: build",
            built,
            "CPU s",
            ratio=built / baseline if baseline else None,
            detail=f"wall {wall:.1f} s; maintenance_work_mem {memory} MB, {fit}",
        ),
        Row(
            section,
            f"{what}: recall@10",
            recall,
            "",
            **judged("search recall", recall),
            detail=f"ef_search {DEFAULT_EF_SEARCH}; "
            + ", ".join(f"{ef}: {r:.3f}" for ef, r in sorted(others.items()))
            + f"; {check}",
        ),
        Row(section, f"{what}: p50 / p95", p95, "ms p95", detail=f"p50 {p50:.1f} ms"),
    ]


def sweep(
    url: str, size: int, grid: tuple[tuple[int, int], ...], queries: int, measured: Callable[[list[Row]], None]
) -> list[Row]:
    """Every setting of ``grid`` at ``size`` vectors, on one loaded table; ``measured`` sees the rows so far."""
    rng = np.random.default_rng(1)
    vectors = clustered(size + queries, rng)
    held_out, vectors = vectors[size:], vectors[:size]
    expected = exact(vectors, held_out)
    name = f"sweep_{size}"
    loader = PgvectorStore(url, dimensions=DIMENSIONS)
    copied = load(loader, name, vectors)
    gap = neighbour_gap(vectors, held_out)
    rows = [
        Row(
            f"hnsw {size:,}",
            "data: COPY; 10th-11th neighbour gap",
            copied,
            "s",
            detail=f"median cosine gap {gap:.5f}; {size // 500:,} rows a centre; {queries} held-out queries",
        )
    ]
    baseline = None
    for m, ef_construction in sorted(grid, key=lambda s: s != BASELINE):  # today's default first: the ratios' base
        found = measure(url, name, size, m, ef_construction, held_out, expected, baseline)
        print_table(found)
        print("\n".join(f"  {r.name}: {r.detail}" for r in found if r.detail), flush=True)
        baseline = baseline or (found[0].value if (m, ef_construction) == BASELINE else None)
        rows += found
        measured(rows)
    loader.drop_collection(name)
    loader.close()
    return rows


def run(
    quick: bool = False,
    sizes: tuple[int, ...] = (100_000, 1_000_000),
    grid: tuple[tuple[int, int], ...] | None = None,
    queries: int = 100,
    measured: Callable[[list[Row]], None] = lambda rows: None,
) -> list[Row]:
    """Every figure of this section, on one database: the small grid at 100,000 and below, the large above."""
    if quick:
        sizes, grid, queries = (20_000,), (BASELINE, (32, 64)), 30
    rows: list[Row] = []
    with database() as url:
        for size in sizes:
            done = list(rows)
            rows += sweep(
                url,
                size,
                grid or (SMALL_GRID if size <= 100_000 else LARGE_GRID),
                queries,
                lambda found: measured(done + found),  # noqa: B023 (called before the loop moves on)
            )
    return rows


def merge(rows: list[Row], path: Path, seconds: float) -> None:
    """Put ``rows`` into ``path`` as part ``hnsw``, replacing only the sections measured again."""
    previous: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    sections = {r.section for r in rows}
    kept = [Row(**r) for r in previous.get("rows", []) if not (r.get("part") == "hnsw" and r["section"] in sections)]
    new = [Row(**{**r.__dict__, "part": "hnsw"}) for r in rows]
    merged = [r for r in kept if r.part != "hnsw"] + sorted(
        [r for r in kept if r.part == "hnsw"] + new, key=lambda r: int(r.section.split()[-1].replace(",", ""))
    )
    with contextlib.redirect_stdout(io.StringIO()):
        table = print_table(merged)
    extra = {k: v for k, v in previous.items() if k not in ("machine", "rows", "table", "seconds")}
    extra["hnsw_measured_separately"] = f"python -m bench.hnsw_sweep, {time.strftime('%Y-%m-%d')}, same machine kind"
    write_json(merged, path, seconds={**previous.get("seconds", {}), "hnsw": round(seconds, 1)}, table=table, **extra)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hnsw_sweep", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--grid", default="", help="settings as MxEF, comma-separated (default: by size)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("bench/results.json"))
    args = parser.parse_args()
    grid = tuple(tuple(int(x) for x in s.split("x")) for s in args.grid.split(",") if s) or None
    start = time.perf_counter()

    def measured(rows: list[Row]) -> None:  # merged after every setting: a long sweep stopped keeps what it measured
        if not args.quick:
            merge(rows, args.out, time.perf_counter() - start)

    rows = run(
        args.quick,
        tuple(int(s) for s in args.sizes.split(",")),
        grid,
        args.queries,  # type: ignore[arg-type]
        measured,
    )
    print_table(rows)


if __name__ == "__main__":
    main()
