"""The whole pipeline on real parts: bulk indexing against the storage limit, live latency under a full
bulk queue, and peak worker memory.

    .venv/bin/python -m bench.pipeline [--records 20000] [--backlog 100000]

Redis, an embedded PostgreSQL with pgvector, two celery worker processes, and
the tests' OpenAI-protocol server for embeddings (free, so the figures are
vectorsync's own cost). The limit is measured in the same run on the same
rows with nothing of vectorsync timed (``bench.limit``): a raw binary COPY of
the stored rows into a table of the same shape, then the same index builds.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
import sqlalchemy as sa

from bench.limit import measure
from bench.report import Row, print_table
from bench.targets import judged
from store import Filter
from store.broker.producer import Producer
from store.settings import load_settings
from store.state.ledger import RunStatus
from store.vectors.pgvector import PgvectorStore
from store.vectors.pgvector.building import build_memory_mb
from tests.crm import CrmTable
from tests.fake_openai import FakeOpenAI
from tests.services import embedded_postgres, redis_server
from tests.settings_files import settings_toml
from tests.workers import celery_worker

DIMENSIONS = 384
#: A bulk load of 20,000 records runs far past the tests' short time limits: these, and a visibility timeout
#: above them, so that no batch is handed to a second worker while the first still runs it.
LIMITS = {"time_limit": 600, "index_time_limit": 900, "visibility_timeout": 1200}
WORDS = [
    "onboarding",
    "rollout",
    "invoice",
    "renewal",
    "pricing",
    "discount",
    "contract",
    "meeting",
    "call",
    "email",
    "churn",
    "support",
    "migration",
    "security",
    "review",
    "latency",
    "quota",
    "billing",
]


@dataclass
class Rig:
    producer: Producer
    crm: CrmTable
    store: PgvectorStore
    config: Path
    database: str


def notes(
    rng: random.Random, start: int, count: int, *, words: tuple[int, int] = (20, 200), vocabulary: list[str] = WORDS
) -> list[dict[str, object]]:
    """CRM notes of ``words`` words from ``vocabulary`` (by default 20 to 200: about three 256-token chunks
    each on average)."""
    return [
        {
            "id": i,
            "title": f"Note {i}",
            "kind": rng.choice(["call", "email"]),
            "body": " ".join(rng.choice(vocabulary) for _ in range(rng.randint(*words))),
        }
        for i in range(start, start + count)
    ]


@contextmanager
def rig(folder: Path, records: int) -> Iterator[Rig]:
    """Redis, PostgreSQL, the embeddings server and a source table of ``records`` notes, with settings."""
    rng = random.Random(3)
    with (
        redis_server() as (redis_url, _),
        embedded_postgres(folder / "pg") as database,
        FakeOpenAI(dimensions=DIMENSIONS) as openai,
    ):
        crm = CrmTable(database, "bench_notes")
        for start in range(1, records + 1, 10_000):
            crm.insert(notes(rng, start, min(10_000, records + 1 - start)))
        config = folder / "vectorsync.toml"
        config.write_text(
            settings_toml(
                broker=redis_url,
                cache=redis_url,
                database=database,
                openai_url=openai.url,
                table="bench_notes",
                collection="notes",
                dimensions=DIMENSIONS,
                max_tokens=256,
                overlap=32,
                batch_size=100,
                limits=LIMITS,
            )
        )
        store = PgvectorStore(database, dimensions=DIMENSIONS)
        try:
            yield Rig(Producer(load_settings(config)), crm, store, config, database)
        finally:
            store.close()


def wait_run(producer: Producer, run_id: str) -> None:
    while producer.reindex_status(run_id).status in (RunStatus.RUNNING, RunStatus.INDEXING):
        time.sleep(0.1)


class PeakMemory:
    """The largest resident memory of one worker process (the parent or a pool child), sampled every 0.2 s."""

    def __init__(self, pid: int) -> None:
        self.peak = 0
        self._root = psutil.Process(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            try:
                for process in [self._root, *self._root.children(recursive=True)]:
                    self.peak = max(self.peak, process.memory_info().rss)
            except psutil.Error:
                pass

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def copy_limit(store: PgvectorStore, database: str, collection: str = "notes") -> tuple[float, int]:
    """Seconds to COPY the indexed collection's rows into a new table and build its indexes (``bench.limit``,
    nothing of vectorsync timed), and the rows: the limit."""
    table = store.get_collection(collection, create=True).table  # type: ignore[attr-defined]
    with store.transaction() as conn:
        rows = conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
    memory = build_memory_mb(rows, dimensions=store.schema.dimensions, m=store.schema.hnsw_m)
    limit = measure(database, table.name, build_memory_mb=memory, build_workers=store.index_build_workers)
    return limit.seconds, limit.rows


def bulk(r: Rig, records: int) -> list[Row]:
    """First index of the source into an empty collection, ending HNSW-indexed, against the limit."""
    with celery_worker(r.config, concurrency=2, name="bulk") as worker:
        memory = PeakMemory(worker.pid)
        start = time.perf_counter()
        wait_run(r.producer, r.producer.reindex_all("notes"))
        seconds = time.perf_counter() - start
        peak = memory.stop()
    limit, chunks = copy_limit(r.store, r.database)
    ratio = limit / seconds
    return [
        Row(
            "bulk",
            f"first index of {records:,} records ({chunks:,} chunks), 2 workers",
            seconds,
            "s",
            ratio=ratio,
            detail=f"{chunks / seconds:,.0f} chunks/s; COPY+build of the same chunks {limit:.1f} s",
            **judged("first index against the limit", ratio),
        ),
        Row("memory", "peak worker process RSS during the bulk index", peak / 2**20, "MiB"),
    ]


def live(r: Rig, backlog: int, samples: int) -> list[Row]:
    """Enqueue-to-searchable latency of index_record while a reindex of ``backlog`` records fills the bulk queue."""
    rng = random.Random(5)
    r.crm.insert(notes(rng, 10_000_001, backlog))  # ids above the first load's
    with celery_worker(r.config, concurrency=2, name="live"):
        run_id = r.producer.reindex_all("notes")
        time.sleep(2)  # the fan-out is filling the bulk queue
        latencies = []
        collection = r.store.get_collection("notes", create=True)
        for n in range(samples):
            record = rng.randint(1, 1000)  # records of the first load
            marker = f"edited{n}x"
            r.crm.update(record, body=f"{marker} " + " ".join(rng.choice(WORDS) for _ in range(30)))
            start = time.perf_counter()
            r.producer.index_record("notes", str(record))
            where = Filter.eq("record_id", str(record))
            while not any(marker in m.text for m in collection.search([1.0] * DIMENSIONS, filter=where, limit=5)):
                time.sleep(0.01)
            latencies.append(time.perf_counter() - start)
            time.sleep(0.3)
        queued = r.producer.reindex_status(run_id)
    p50, p95, p99 = (float(np.percentile(latencies, q)) for q in (50, 95, 99))
    return [
        Row(
            "live",
            f"index_record enqueue-to-searchable under a {backlog:,}-record reindex: p95",
            p95,
            "s",
            **judged("live update p95 under a reindex", p95),
            detail=f"p50 {p50:.2f} s, p99 {p99:.2f} s, {samples} edits; the reindex had "
            f"{queued.processed}/{queued.total} records done at the end",
        )
    ]


def run(quick: bool = False, records: int = 20_000, backlog: int = 100_000, samples: int = 40) -> list[Row]:
    if quick:
        records, backlog, samples = 3_000, 10_000, 10
    with tempfile.TemporaryDirectory(prefix="vsbench") as folder, rig(Path(folder), records) as r:
        rows = bulk(r, records)
        rows += live(r, backlog, samples)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print_table(run(args.quick, args.records, args.backlog))


if __name__ == "__main__":
    main()
