"""Benchmark what reading a collection's alias costs a search: ``store.query.search`` against the collection itself.

    .venv/bin/python -m bench.aliases [--quick]

Every search through ``store.query`` first reads the collection's alias (one
indexed ``SELECT`` in the state database), so a switch is seen by the next
search. This measures that cost on the same 384-d vectors in the same run:
``Collection.search`` on the table (the limit), ``search`` on a collection
never migrated (the alias read finds nothing), and ``search`` on a migrated
one (its live generation, opened through its own store), beside ``search``
as it was before aliases. Vector queries, so no embedding is timed. On the
search rows ``ratio`` is the p50 before aliases over the path's p50 (1.0: no
cost); on that row, the table's over it. Never run as a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.report import Row, print_table
from bench.servers import database
from store.vectors.backends import open_store

__all__ = ["main", "run"]

SECTION = "aliases"
DIMENSIONS = 384
SETTINGS = """
[models.first]
provider = "fake"
model = "fake-first"
dimensions = {d}
[models.second]
provider = "fake"
model = "fake-second"
dimensions = {d}
[embeddings]
chain = ["first"]
cache_ttl_days = 0
[vectors]
store = "pgvector"
url = "{url}"
dimensions = {d}
[collections.plain.source]
kind = "python"
loader = "bench.aliases:nothing"
[collections.moved.source]
kind = "python"
loader = "bench.aliases:nothing"
"""


def nothing(ids: list[str] | None = None) -> list[object]:
    """The collections' loader: nothing is indexed through a worker here."""
    return []


def timed(paths: dict[str, Callable[[list[float]], object]], queries: np.ndarray) -> dict[str, list[float]]:
    """Milliseconds of each search on each path, after a warm-up of 20; the paths take turns on each query,
    so the machine's drift touches them alike."""
    took: dict[str, list[float]] = {name: [] for name in paths}
    for number, query in enumerate(queries):
        vector = query.tolist()
        for name, search in paths.items():
            start = time.perf_counter()
            search(vector)
            if number >= 20:
                took[name].append((time.perf_counter() - start) * 1000)
    return took


def run(quick: bool = False) -> list[Row]:
    """The alias rows: 20,000 vectors (5,000 when ``quick``), 1,000 queries (200) on each path."""
    from store import query
    from store.process.defaults import default_client, use_client
    from store.settings import load_settings
    from store.state.generations.base import registered
    from store.state.ledger.postgres import PostgresLedger
    from store.vectors import VectorRecord

    count, searches = (5_000, 220) if quick else (20_000, 1_020)
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((count, DIMENSIONS)).astype(np.float32)
    queries = rng.standard_normal((searches, DIMENSIONS)).astype(np.float32)
    records = [VectorRecord(f"r{i}", vectors[i], metadata={"record_id": f"r{i}"}) for i in range(count)]
    with database() as url, tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "vectorsync.toml"
        config.write_text(SETTINGS.format(d=DIMENSIONS, url=url))
        os.environ["VECTORSYNC_CONFIG"] = str(config)
        settings = load_settings(config)
        ledger = PostgresLedger(url)
        first, second = (
            registered(settings, "moved", [name], number) for number, name in ((1, "first"), (2, "second"))
        )
        ledger.generations.begin(first, second)
        ledger.generations.switch("moved", 2, expected=1)
        with open_store(settings) as store:
            for name in ("plain", "moved__g2"):
                store.get_collection(name, create=True).upsert_many(records)
                store.get_collection(name, create=True).ensure_index()
            table = store.get_collection("plain", create=True)
            previous = use_client(None)
            try:
                took = timed(
                    {
                        "limit": lambda q: table.search(q, limit=10),
                        # what search did before aliases: the settings read again, the collection opened
                        "before": lambda q: query.open_collection(
                            default_client().store, "plain", configured=load_settings().collections
                        ).search(q, limit=10),
                        "plain": lambda q: query.search("plain", q, limit=10),
                        "moved": lambda q: query.search("moved", q, limit=10),
                    },
                    queries,
                )
                limit, before, plain, moved = took["limit"], took["before"], took["plain"], took["moved"]
            finally:
                built = use_client(previous)
                if built is not None:
                    built.close()
        ledger.close()
    base, old = statistics.median(limit), statistics.median(before)
    rows = [
        Row(SECTION, f"Collection.search p50 ({count:,} vectors)", base, "ms"),
        Row(SECTION, "search p50 before aliases", old, "ms", ratio=round(base / old, 3)),
    ]
    for name, took in (("search, never migrated", plain), ("search, migrated (live generation 2)", moved)):
        p50, p95 = statistics.median(took), float(np.percentile(took, 95))
        rows.append(
            Row(
                SECTION,
                f"{name} p50",
                p50,
                "ms",
                ratio=round(old / p50, 3),
                detail=f"p95 {p95:.2f} ms; ratio: before aliases / this",
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="5,000 vectors, 200 queries")
    print_table(run(quick=parser.parse_args().quick))


if __name__ == "__main__":
    main()
