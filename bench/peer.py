"""vectorsync against LangChain's indexing API, on the same corpus, embedder and PostgreSQL, in one run.

    .venv/bin/python -m bench --only peer        (the peer's packages first: scripts/bench-peer)

The pipeline section's rig (``bench.pipeline.rig``: 20,000 notes in a SQL table, the OpenAI-protocol
server, Redis, an embedded PostgreSQL with pgvector) and its code path for vectorsync: two celery worker
processes and ``reindex_all``, timed until the run is done (HNSW built). The peer
(``bench.langchain_peer``) is timed from reading the same rows to its HNSW index. Three cases, each side
in turn: the first index, an unchanged re-index, and a re-index after 1% of the records were edited
(the peer re-reads the whole table, as ``index()`` with incremental cleanup is meant to be fed). Machines
here differ by up to 1.5x between sittings, so the result is the ratio of records/s within this run.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.cpu import CpuMeter
from bench.langchain_peer import Peer, documents, packages
from bench.pipeline import Rig, notes, rig, wait_run
from bench.report import Row, print_table
from bench.targets import judged
from store.contract import RunStatus
from store.settings import load_settings
from tests.workers import celery_worker

__all__ = ["run"]

#: Share of the records edited before the third case.
EDITED = 0.01


@dataclass(frozen=True)
class Timed:
    """One side's run of one case: seconds, CPU seconds of every process involved, and what it did."""

    seconds: float
    cpu: float
    detail: str


def timed(work: Callable[[], str], cpu: CpuMeter) -> Timed:
    used, start = cpu.seconds(), time.perf_counter()
    detail = work()
    return Timed(time.perf_counter() - start, cpu.seconds() - used, detail)


def vectorsync(r: Rig) -> Callable[[], str]:
    """One ``reindex_all`` until done; what the run counted, and when its index build began."""

    def work() -> str:
        start = time.perf_counter()
        run_id = r.producer.reindex_all("notes")
        while (run := r.producer.reindex_status(run_id)).status == RunStatus.RUNNING:
            time.sleep(0.1)
        loaded = time.perf_counter() - start
        wait_run(r.producer, run_id)
        run = r.producer.reindex_status(run_id)
        built = time.perf_counter() - start - loaded
        phases = f"; load {loaded:.1f} s + HNSW build {built:.1f} s" if built > 0.5 else ""
        return f"run {run.status}: {run.done:,} indexed, {run.skipped:,} skipped, {run.failed:,} failed{phases}"

    return work


def peer(r: Rig, side: Peer, *, first: bool) -> Callable[[], str]:
    """Read the source, chunk, ``index()``; on the first load, build HNSW too; what ``index()`` counted."""
    settings = load_settings(r.config)

    def work() -> str:
        start = time.perf_counter()
        docs = documents(r.crm.rows(), settings, "notes")
        read = time.perf_counter() - start
        counts = side.sync(docs)
        synced = time.perf_counter() - start - read
        if first:
            side.build_index()
        built = time.perf_counter() - start - read - synced
        done = ", ".join(f"{counts[k]:,} {k.removeprefix('num_')}" for k in sorted(counts))
        phases = f" + HNSW build {built:.1f} s" if first else ""
        return f"{done}; read and chunk {read:.1f} s + index() {synced:.1f} s{phases}"

    return work


def edit(r: Rig, records: int) -> int:
    """Give 1% of the records new bodies (their ``updated_at`` moves, as an application's write does)."""
    rng = random.Random(11)
    chosen = rng.sample(range(1, records + 1), max(1, int(records * EDITED)))
    for record, row in zip(chosen, notes(rng, 1, len(chosen)), strict=True):
        r.crm.update(record, body=f"edited {row['body']}")
    return len(chosen)


def rows_for(
    case: str, what: str, records: int, ours: Timed, theirs: Timed, *, target: bool, note: str = ""
) -> list[Row]:
    """Each side's seconds and records/s, vectorsync's records/s against the peer's, and the same per CPU
    second (every process: the bench's, the workers', Redis, PostgreSQL's)."""
    ratio, per_cpu = theirs.seconds / ours.seconds, theirs.cpu / ours.cpu
    return [
        Row(
            case,
            f"vectorsync: {what}",
            ours.seconds,
            "s",
            detail=f"{records / ours.seconds:,.0f} records/s, {ours.cpu:.1f} CPU s; {ours.detail}",
        ),
        Row(
            case,
            f"LangChain index() + PGVector: {what}",
            theirs.seconds,
            "s",
            detail=f"{records / theirs.seconds:,.0f} records/s, {theirs.cpu:.1f} CPU s; {theirs.detail}",
        ),
        Row(
            case,
            f"vectorsync / LangChain, records/s: {what}",
            ratio,
            "x",
            ratio=ratio,
            **(judged("first index against the peer", ratio) if target else {}),
            detail=f"{records / ours.seconds:,.0f} against {records / theirs.seconds:,.0f} records/s{note}",
        ),
        Row(
            case,
            f"vectorsync / LangChain, records per CPU second: {what}",
            per_cpu,
            "x",
            ratio=per_cpu,
            detail=f"{records / ours.cpu:,.0f} against {records / theirs.cpu:,.0f} records per CPU second",
            **(judged("first index against the peer", per_cpu) if target else {}),
        ),
    ]


def measure(r: Rig, records: int) -> list[Row]:
    """The three cases, vectorsync then the peer in each, on one PostgreSQL and one embeddings server."""
    settings = load_settings(r.config)
    side = Peer(r.store.url, settings)
    cpu = CpuMeter(side.engine)
    before = os.getloadavg()[0]
    try:
        with celery_worker(r.config, concurrency=2, name="peer"):
            first = timed(vectorsync(r), cpu), timed(peer(r, side, first=True), cpu)
            if not side.searchable("pricing renewal"):
                raise AssertionError("the peer's collection answers no search after its first index")
            chunks = side.chunks(), r.store.get_collection("notes", create=True).count()
            again = timed(vectorsync(r), cpu), timed(peer(r, side, first=False), cpu)
            edited = edit(r, records)
            changed = timed(vectorsync(r), cpu), timed(peer(r, side, first=False), cpu)
            builds = rebuilds(side)
    finally:
        side.close()
    sizes = f"{records:,} records (chunks: {chunks[1]:,} vectorsync, {chunks[0]:,} peer)"
    shared = f"; 1-min load average {before:.1f} before, {os.getloadavg()[0]:.1f} after, {os.cpu_count()} cores"
    return [
        *rows_for(
            "first index", f"first index of {sizes}, until searchable (HNSW)", records, *first, target=True, note=shared
        ),
        *rows_for("unchanged", f"unchanged re-index of {records:,} records", records, *again, target=False),
        *rows_for(
            "1% edited",
            f"re-index after {edited:,} of {records:,} records were edited",
            records,
            *changed,
            target=False,
        ),
        Row(
            "peer HNSW build",
            "the peer's HNSW build on the server's defaults (maintenance_work_mem, "
            "parallel workers), as langchain-postgres leaves them",
            builds[1],
            "s",
            ratio=builds[1] / builds[0],
            detail=f"against {builds[0]:.1f} s sized as vectorsync sizes its own build (the figures above)",
        ),
    ]


def rebuilds(side: Peer) -> tuple[float, float]:
    """Seconds of the peer's HNSW build again, sized as vectorsync's, then on the server's defaults."""
    seconds = []
    for sized in (True, False):
        side.drop_index()
        start = time.perf_counter()
        side.build_index(sized=sized)
        seconds.append(time.perf_counter() - start)
    return seconds[0], seconds[1]


def run(quick: bool = False, records: int = 20_000) -> list[Row]:
    if quick:
        records = 3_000
    packages()  # before any server starts: the missing extra's message, not a traceback half-way
    with tempfile.TemporaryDirectory(prefix="vsbench") as folder, rig(Path(folder), records) as r:
        return measure(r, records)


if __name__ == "__main__":
    print_table(run())
