"""Change capture on real parts: how fast a plain SQL write becomes searchable, how a 100,000-row ``UPDATE``
drains against a reindex of the same change, and what the trigger costs the writer.

    .venv/bin/python -m bench.capture [--quick]

Redis, the bench's PostgreSQL with pgvector, and two celery worker processes
with the relay in their main processes. The writers are plain psycopg
connections with no vectorsync code, as psql or another service would be.
Embeddings come from the in-process ``fake`` provider (32-d hashed words, no
model, no network), so the bulk figures measure the capture machinery, the
queue and the store's writes, not a model. Freshness and the bulk figures run
with the workers idle otherwise; the write rates run with the workers stopped
(``bench.capture_writes``). Never run as a test.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psycopg

from bench.capture_writes import writes
from bench.pipeline import notes, wait_run
from bench.report import Row, print_table
from bench.servers import database
from bench.targets import judged
from store.broker.producer import Producer
from store.capture import control
from store.settings import Settings, load_settings
from tests.crm import OUTBOX, WORDS, CrmTable, Psql, insert_notes
from tests.services import redis_server
from tests.settings_files import sql_collection, worker_sections
from tests.workers import celery_worker, run_cli

__all__ = ["Rig", "main", "run"]

SECTION = "capture"
COLLECTION = "notes"
TABLE = "bench_notes"
DIMENSIONS = 32
#: Seconds between the freshness writes: one single-row UPDATE every 50 ms.
INTERVAL = 0.05
#: Record ids per index_batch task, for the relay's floods and the reindex alike.
BATCH = 100


@dataclass
class Rig:
    """The bench's system: the source table's database, settings with NOTIFY off (the default) and on."""

    database: str
    config: Path
    poll: Settings
    notify: Settings
    records: int

    @property
    def chunks(self) -> str:
        return self.poll.vectors.table_prefix + COLLECTION


def settings_text(broker: str, url: str, *, notify: bool) -> str:
    """Two workers' settings: the fake provider, the collection over TABLE with capture, the relay's defaults."""
    collection = sql_collection(database=url, table=TABLE, collection=COLLECTION, capture=True)
    if notify:
        collection = collection.replace('capture = "trigger"', 'capture = "trigger"\ncapture_notify = true')
    sections = worker_sections(broker=broker, database=url, dimensions=DIMENSIONS, batch_size=BATCH)
    # A first index of 100,000 records builds its HNSW index in one task: room for it on a busy machine.
    for short, long in (
        ("time_limit = 50", "time_limit = 300"),
        ("index_time_limit = 55", "index_time_limit = 600"),
        ("visibility_timeout = 60", "visibility_timeout = 1200"),
    ):
        sections = sections.replace(short, long)
    return (
        f'{sections}\n[models.fake]\nprovider = "fake"\nmodel = "fake"\ndimensions = {DIMENSIONS}\n\n'
        f'[embeddings]\nchain = ["fake"]\ncache_ttl_days = 0\n{collection}\n[capture]\npoll_seconds = 0.5\n'
    )


@contextmanager
def rig(folder: Path, records: int) -> Iterator[Rig]:
    """Redis, PostgreSQL, the source table of ``records`` notes, and capture installed on it (NOTIFY off)."""
    rng = random.Random(11)
    with redis_server() as (redis_url, _), database(folder) as url:
        CrmTable(url, TABLE).close()
        sql = Psql(url)
        for start in range(1, records + 1, 20_000):
            batch = min(20_000, records + 1 - start)  # notes of 8 to 16 words: one chunk each
            insert_notes(sql, TABLE, notes(rng, start, batch, words=(8, 16), vocabulary=WORDS))
        sql.close()
        configs = {}
        for name, notify in (("vectorsync", False), ("notify", True)):
            configs[name] = folder / f"{name}.toml"
            configs[name].write_text(settings_text(redis_url, url, notify=notify))
        r = Rig(
            url, configs["vectorsync"], load_settings(configs["vectorsync"]), load_settings(configs["notify"]), records
        )
        control.enable(r.poll, COLLECTION)  # before the workers start: their relays find the outbox at once
        yield r


def first_index(r: Rig) -> float:
    """The first index of the whole table (a reindex into the empty collection: load, then build)."""
    producer = Producer(r.poll)
    try:
        start = time.perf_counter()
        wait_run(producer, producer.reindex_all(COLLECTION))
        return time.perf_counter() - start
    finally:
        producer.close()


def freshness(r: Rig, samples: int, *, notify: bool) -> Row:
    """Commit-to-searchable of ``samples`` single-row UPDATEs, one every INTERVAL, each of another row, from a
    plain psycopg client: searchable when the record's chunk in the store holds the write's marker."""
    control.enable(r.notify if notify else r.poll, COLLECTION)
    time.sleep(1.0)
    tag = "n" if notify else "p"
    first = 1 + (r.records // 2 if notify else 0)
    waiting: dict[str, tuple[str, float]] = {}
    lock = threading.Lock()
    writer = Psql(r.database)

    def write() -> None:
        start = time.perf_counter()
        for n in range(samples):
            time.sleep(max(0.0, start + n * INTERVAL - time.perf_counter()))
            marker = f"fresh{tag}{n}x"
            writer.run(
                f'UPDATE "{TABLE}" SET body = %s WHERE id = %s', (f"{marker} {WORDS[n % len(WORDS)]}", first + n)
            )
            with lock:
                waiting[f"{first + n}:0"] = (marker, time.perf_counter())

    latencies: list[float] = []
    thread = threading.Thread(target=write, daemon=True)
    with psycopg.connect(r.database, autocommit=True) as watcher:
        thread.start()
        deadline = time.monotonic() + samples * INTERVAL + 60
        while thread.is_alive() or waiting:
            with lock:
                ids = list(waiting)
            if ids:
                found = watcher.execute(f'SELECT id, text FROM "{r.chunks}" WHERE id = ANY(%s)', (ids,)).fetchall()
                now = time.perf_counter()
                with lock:
                    for chunk, text in found:
                        marker, committed = waiting[chunk]
                        if marker in text:
                            latencies.append(now - committed)
                            del waiting[chunk]
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(waiting)} freshness writes not searchable after 60 s: see the worker logs")
            time.sleep(0.005)
    thread.join()
    writer.close()
    p50, p95 = (float(np.percentile(latencies, q)) for q in (50, 95))
    how = "NOTIFY on (capture_notify)" if notify else "NOTIFY off (default), poll every 0.5 s"
    return Row(
        SECTION,
        f"commit-to-searchable, {how}: p95",
        p95,
        "s",
        **judged("capture freshness p95", p95),
        detail=f"p50 {p50:.3f} s, p95 {p95:.3f} s, max {max(latencies):.3f} s; {samples} single-row UPDATEs "
        f"every {INTERVAL * 1000:.0f} ms, 2 idle workers",
    )


def drained(sql: Psql) -> bool:
    """The outbox holds nothing of the collection: the relays sent every change."""
    return not sql.run(f"SELECT EXISTS (SELECT FROM {OUTBOX} WHERE collection = %s)", (COLLECTION,))[0][0]


def indexed(r: Rig, sql: Psql, marker: str) -> bool:
    """Every record's chunk in the store has ``marker``."""
    done = sql.run(f'SELECT count(*) FROM "{r.chunks}" WHERE chunk = 0 AND strpos(text, %s) > 0', (marker,))[0][0]
    return int(done) == r.records


def wait_indexed(r: Rig, sql: Psql, marker: str, start: float, timeout: float = 900) -> float:
    """Until the outbox is empty and every record is indexed with ``marker``; seconds from ``start`` (a
    ``perf_counter``) to when the outbox was first seen empty."""
    deadline, sent = time.monotonic() + timeout, None
    while sent is None or not indexed(r, sql, marker):
        if sent is None and drained(sql):
            sent = time.perf_counter() - start
            continue
        if time.monotonic() > deadline:
            raise RuntimeError(f"the records with {marker!r} were not all indexed after {timeout:.0f} s")
        time.sleep(0.5)
    return sent


def bulk(r: Rig, first: float) -> list[Row]:
    """One UPDATE of every row, captured: until the outbox is empty and every record's new text is in the store;
    against the same UPDATE with capture removed and then ``vectorsync reindex --wait``."""
    sql = Psql(r.database)
    sql.run(f'VACUUM ANALYZE "{TABLE}"')
    start = time.perf_counter()
    sql.run(f"UPDATE \"{TABLE}\" SET title = title || ' bulk1'")
    captured_statement = time.perf_counter() - start
    sent = wait_indexed(r, sql, "bulk1", start)
    captured = time.perf_counter() - start
    control.disable(r.poll, COLLECTION)
    sql.run(f'VACUUM ANALYZE "{TABLE}"')
    start = time.perf_counter()
    sql.run(f"UPDATE \"{TABLE}\" SET title = title || ' bulk2'")
    plain_statement = time.perf_counter() - start
    done = run_cli(r.config, "reindex", COLLECTION, "--wait", timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"vectorsync reindex failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    wait_indexed(r, sql, "bulk2", start)
    reindexed = time.perf_counter() - start
    sql.close()
    n = f"{r.records:,}"
    return [
        Row(
            SECTION,
            f"UPDATE of {n} rows, captured: until the outbox is empty and all indexed",
            captured,
            "s",
            ratio=reindexed / captured,
            detail=f"the relays emptied the outbox {sent:.1f} s after the UPDATE began; ratio: the reindex below / "
            f"this; fake 32-d embedder, 2 workers x 1 process; first index of the table {first:.1f} s",
        ),
        Row(
            SECTION,
            "the same UPDATE with capture removed, then vectorsync reindex --wait",
            reindexed,
            "s",
            detail="until every record is indexed, from the UPDATE's start",
        ),
        Row(
            SECTION,
            f"the UPDATE statement of {n} rows, with the trigger",
            captured_statement,
            "s",
            ratio=plain_statement / captured_statement,
            detail=f"without the trigger {plain_statement:.2f} s; ratio: without / with",
        ),
    ]


def run(quick: bool = False, records: int = 100_000, samples: int = 200) -> list[Row]:
    """The capture rows: freshness (NOTIFY off, then on), the bulk UPDATE, then the write rates."""
    if quick:
        records, samples = 10_000, 40
    with tempfile.TemporaryDirectory(prefix="vsbench") as folder, rig(Path(folder), records) as r:
        with ExitStack() as workers:
            for name in ("cap1", "cap2"):
                workers.enter_context(celery_worker(r.config, concurrency=1, name=name))
            first = first_index(r)
            rows = [freshness(r, samples, notify=False), freshness(r, samples, notify=True)]
            control.enable(r.poll, COLLECTION)
            rows += bulk(r, first)
        rows += writes(r.database, TABLE, r.records, Path(folder), quick=quick)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="10,000 rows, 40 freshness writes, short rate runs")
    print_table(run(quick=parser.parse_args().quick))


if __name__ == "__main__":
    main()
