"""Benchmark ``verify`` on a large pgvector collection: its time and peak memory, full and sampled.

    .venv/bin/python -m bench.verify_scale [--sizes 100000,1000000] [--sample 1000] [--quick]

Each collection is built without embedding anything: ``chunks / 2`` records of 2 chunks each, written as the
pipeline writes them (chunk ids ``ID:0`` and ``ID:1``, metadata ``record_id`` and ``chunk``, the model's name,
a short text of a few words, so the keyword statistics hold real terms), by binary COPY
(``PgvectorCollection.copy_rows``), with 8-dimensional vectors: verify checks a vector's presence and size, not
its values. The keyword statistics are then counted from the rows, as a bulk load does. The HNSW index and the
GIN indexes are not built: verify reads by ``record_id`` (its btree is kept) and never searches. The matching
ledger entries (content hash, model, chunk count) go into the ledger's table by COPY too.

Each verify runs in a fresh child process (``--child``), so its peak RSS (``VmHWM``) is its own; the child
reads it after importing and opening the client's parts (the baseline) and again after the verify. Every verify
measured must be clean: a verify that found everything drifted would measure nothing. On the smallest size a
handful of records are then made to drift behind the ledger's back, and verify must find exactly them.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from bench.report import Row, print_table
from bench.servers import database
from bench.targets import judged

__all__ = ["main", "run"]

SECTION = "verify"
DIMENSIONS = 8
MODEL = "fake"
CHUNKS_PER_RECORD = 2
#: Records written by one COPY.
BATCH = 25_000
#: Words the chunk texts are drawn from (a fixed vocabulary: the statistics stay a few thousand terms).
VOCABULARY = 2_000
WORDS_PER_CHUNK = 8
SETTINGS = """
[models.{model}]
provider = "fake"
model = "{model}"
dimensions = {d}
[embeddings]
chain = ["{model}"]
cache_ttl_days = 0
[vectors]
store = "pgvector"
url = "{url}"
dimensions = {d}
"""
COLLECTION = """
[collections.{name}.source]
kind = "python"
loader = "bench.verify_scale:nothing"
"""


def nothing(ids: list[str] | None = None) -> list[object]:
    """The collections' loader: nothing is read from a source here."""
    return []


def collection_name(chunks: int) -> str:
    return f"scale{chunks}"


def record_id(number: int) -> str:
    return f"r{number:07d}"


def _texts(rng: np.random.Generator, count: int) -> list[str]:
    words = rng.integers(0, VOCABULARY, (count, WORDS_PER_CHUNK))
    return [" ".join(f"w{w}" for w in row) for row in words]


def _batches(records: int, rng: np.random.Generator) -> Iterator[tuple[list[Any], list[tuple[Any, ...]]]]:
    """The chunks (``VectorRecord``) and ledger rows of ``records`` records, ``BATCH`` records at a time."""
    from store.vectors.records import VectorRecord, text_digest

    for start in range(0, records, BATCH):
        numbers = range(start, min(records, start + BATCH))
        vectors = rng.standard_normal((len(numbers) * CHUNKS_PER_RECORD, DIMENSIONS)).astype(np.float32)
        texts = _texts(rng, len(numbers) * CHUNKS_PER_RECORD)
        chunks, entries = [], []
        for n, number in enumerate(numbers):
            rid = record_id(number)
            mine = [n * CHUNKS_PER_RECORD + c for c in range(CHUNKS_PER_RECORD)]
            for c, k in enumerate(mine):
                chunks.append(VectorRecord(f"{rid}:{c}", vectors[k], texts[k], {"record_id": rid, "chunk": c}, MODEL))
            content = text_digest("\n".join(texts[k] for k in mine))
            entries.append((rid, content, MODEL, CHUNKS_PER_RECORD, 0, ""))
        yield chunks, entries


def build(url: str, settings: Any, chunks: int) -> float:
    """Collection ``scale<chunks>`` and its ledger entries, clean; returns the seconds it took."""
    import psycopg
    from psycopg import sql

    from store.connect.postgres import driver
    from store.state.ledger.postgres import PostgresLedger
    from store.state.tables import ledger as ledger_table
    from store.vectors.backends import open_store
    from store.vectors.pgvector import PgvectorStore
    from store.vectors.pgvector.keywords import count_rows
    from store.vectors.pgvector.table import PgvectorCollection

    started = time.perf_counter()
    name = collection_name(chunks)
    PostgresLedger(url).close()  # the state tables, brought up to date
    columns = ("collection", "record_id", "content_hash", "model", "chunks", "version", "stamp", "indexed_at")
    copy_ledger = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(ledger_table.name), sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    )
    rng = np.random.default_rng(chunks)
    with open_store(settings) as store:
        assert isinstance(store, PgvectorStore)
        collection = store.get_collection(name, create=True)
        assert isinstance(collection, PgvectorCollection)
        collection.defer_index()  # HNSW and the GINs dropped; verify uses neither
        with psycopg.connect(url, autocommit=True) as ledger_conn:
            for rows, entries in _batches(chunks // CHUNKS_PER_RECORD, rng):
                with store.transaction() as conn:
                    collection.copy_rows(driver(conn), collection.table.name, rows)
                with ledger_conn.transaction(), ledger_conn.cursor() as cursor, cursor.copy(copy_ledger) as copy:
                    for entry in entries:
                        copy.write_row((name, *entry, "now"))
        with store.transaction() as conn:
            count_rows(conn, collection.table)  # the keyword statistics, as a bulk load counts them
            conn.exec_driver_sql(f'ANALYZE "{collection.table.name}"')  # the bench's own table name
            conn.exec_driver_sql(f'ANALYZE "{ledger_table.name}"')
    return time.perf_counter() - started


def measured(config: Path, collection: str, sample: int | None = None, *, idle: bool = False) -> dict[str, Any]:
    """One verify (or none, ``idle``) in a fresh child process: what it printed as JSON."""
    command = [sys.executable, "-m", "bench.verify_scale", "--child", str(config), collection]
    if sample is not None:
        command += ["--sample", str(sample)]
    if idle:
        command.append("--idle")
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"verify child failed ({done.returncode}): {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _max_rss_mib() -> float:
    """This process's peak RSS: ``VmHWM``, its own address space's high-water mark. Not ``ru_maxrss``: on Linux
    a child started by fork and exec keeps its parent's, which here has just built the collection."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child(config: Path, collection: str, sample: int | None, idle: bool) -> dict[str, Any]:
    """In the child: open the client's parts, read the baseline, verify, read the peak."""
    from store.client import Client
    from store.settings import load_settings

    with Client(load_settings(config)) as client:
        client.router.read(collection)
        client.ledger.entries_page(collection, after=None, limit=1)
        baseline = _max_rss_mib()
        if idle:
            return {"baseline_mib": baseline, "peak_mib": _max_rss_mib()}
        start = time.perf_counter()
        report = client.verify(collection, sample=sample)
        seconds = time.perf_counter() - start
        return {
            "baseline_mib": baseline,
            "peak_mib": _max_rss_mib(),
            "seconds": seconds,
            "clean": report.clean,
            "records": report.records,
            "chunks": report.chunks,
            "drifted": report.drifted,
            "orphan_records": report.orphan_records,
            "keyword_terms": report.keyword_terms,
            "kinds": report.kinds,
            "first": sorted(d.record_id for d in report.first),
        }


def drift_check(url: str, config: Path, chunks: int) -> int:
    """Make a few records drift behind the ledger's back; verify must find exactly them (and nothing else).
    Returns how many."""
    import psycopg

    from store.settings import load_settings

    name = collection_name(chunks)
    table = load_settings(config).vectors.table_prefix + name
    records = chunks // CHUNKS_PER_RECORD
    missing, short, orphan, model = (record_id(n) for n in (3, records // 2, records - 2, records // 3))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DELETE FROM "{table}" WHERE record_id = %s', [missing])  # the bench's own table name
        conn.execute(f'DELETE FROM "{table}" WHERE id = %s', [f"{short}:1"])
        conn.execute(f'UPDATE "{table}" SET model = %s WHERE id = %s', ["another", f"{model}:0"])
        conn.execute("DELETE FROM vectorsync_ledger WHERE collection = %s AND record_id = %s", [name, orphan])
    found = measured(config, name)
    drifted = sorted([missing, short, model, orphan])
    want = {"first": drifted, "drifted": 3, "orphan_records": 1}
    if {k: found[k] for k in want} != want or found["kinds"] != {"missing": 1, "count": 1, "model": 1, "orphan": 1}:
        raise AssertionError(f"verify did not find exactly the drifts made: {found}")
    return len(drifted)


def run(
    quick: bool = False, sizes: tuple[int, ...] = (100_000, 1_000_000), sample: int = 1_000, folder: Path | None = None
) -> list[Row]:
    """Every figure of this section, on one database."""
    from store.settings import load_settings

    if quick:
        sizes = (20_000,)
    rows: list[Row] = []
    peaks: dict[int, float] = {}
    with database(folder) as url, tempfile.TemporaryDirectory() as where:
        config = Path(where) / "vectorsync.toml"
        declared = "".join(COLLECTION.format(name=collection_name(n)) for n in sizes)
        config.write_text(SETTINGS.format(model=MODEL, d=DIMENSIONS, url=url) + declared)
        settings = load_settings(config)
        idle: dict[str, Any] | None = None
        for chunks in sizes:
            name = collection_name(chunks)
            built = build(url, settings, chunks)
            if idle is None:
                idle = measured(config, name, idle=True)
            full, sampled = measured(config, name), measured(config, name, sample)
            for what, got, wanted in (("full", full, chunks), ("sampled", sampled, sample * CHUNKS_PER_RECORD)):
                if not got["clean"] or got["chunks"] != wanted:
                    raise AssertionError(f"verify ({what}) of a clean collection of {chunks:,} chunks: {got}")
            peaks[chunks] = full["peak_mib"]
            rows += _rows(chunks, built, full, sampled, sample)
        assert idle is not None
        rows.append(Row(SECTION, "idle child (client opened, no verify): peak RSS", idle["peak_mib"], "MiB"))
        if len(sizes) > 1:
            small, large = min(sizes), max(sizes)
            ratio = peaks[large] / peaks[small]
            rows.append(
                Row(
                    SECTION,
                    f"full verify peak RSS, {large:,} against {small:,} chunks",
                    peaks[large] - peaks[small],
                    "MiB more",
                    ratio=round(ratio, 3),
                    **judged("verify memory growth", ratio),
                )
            )
        made = drift_check(url, config, sizes[0])
        rows.append(Row(SECTION, f"drifts made in {sizes[0]:,} chunks, found exactly", made, "records"))
    return rows


def _rows(chunks: int, built: float, full: dict[str, Any], sampled: dict[str, Any], sample: int) -> list[Row]:
    """The time and peak RSS of the full and the sampled verify of one collection."""
    section = f"verify {chunks:,} chunks"
    rows = [
        Row(
            section,
            "full verify: time",
            full["seconds"],
            "s",
            detail=f"{chunks // CHUNKS_PER_RECORD:,} records; collection built in {built:.0f} s",
        )
    ]
    for what, got in (("full verify", full), (f"verify --sample {sample:,}", sampled)):
        if what != "full verify":
            rows.append(Row(section, f"{what}: time", got["seconds"], "s"))
        growth = got["peak_mib"] - got["baseline_mib"]
        detail = f"baseline {got['baseline_mib']:.0f} MiB before the verify, growth {growth:.1f} MiB"
        rows.append(Row(section, f"{what}: peak RSS", got["peak_mib"], "MiB", detail=detail))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="100000,1000000", help="chunks per collection")
    parser.add_argument("--sample", type=int, default=None, help="records a sampled verify draws (1,000)")
    parser.add_argument("--quick", action="store_true", help="20,000 chunks")
    parser.add_argument("--child", nargs=2, metavar=("CONFIG", "COLLECTION"), help=argparse.SUPPRESS)
    parser.add_argument("--idle", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.child[0]), args.child[1], args.sample, args.idle)))
        return
    sizes = tuple(int(s) for s in args.sizes.split(","))
    print_table(run(args.quick, sizes, args.sample or 1_000))


if __name__ == "__main__":
    main()
