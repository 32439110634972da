"""A million records through the whole pipeline: each phase's cost per record at 10,000 to 1,000,000 records,
the storage limit at each size, and what each part holds in memory and on disk.

    .venv/bin/python -m bench.scale [--sizes 10000,20000,100000,1000000] [--quick]
        [--processes N] [--batch-size N]

Each size gets a system of its own: Redis, the bench's PostgreSQL with pgvector (``bench.servers``), two
``celery worker`` processes of one pool process each, and the in-process ``fake`` embedder at DIMENSIONS
dimensions with no embedding cache (no model, no network, nothing kept per text: the figures are vectorsync's
own cost). The source is the pipeline bench's corpus (``bench.pipeline.notes``: 20 to 200 words a note, about
1.4 chunks of 256 tokens). The phases, in order:

- first index: ``reindex`` into the empty collection until its run ends ``done`` (HNSW built: searchable),
  and the limit on the same rows (``bench.limit``: a raw binary COPY and the same index builds);
- unchanged: ``reindex`` again, nothing changed;
- 1% edit: one UPDATE of 1% of the rows (``updated_at`` moved), then ``reindex``;
- reconcile: a reconcile sweep (``Producer.reconcile``) to its end;
- capture burst: change capture on, one UPDATE of another 1% of the rows, until the outbox is empty and every
  edited record's new text is stored;
- ``vectorsync status`` and ``vectorsync doctor``: wall time of the command.

What bounds a phase is measured beside it: the CPU seconds of the first index, the limit, the 1% edit and the
capture burst (``bench.cpu``: the bench's process tree, which holds the workers, and PostgreSQL's), the
pipeline's own index build (its ``build_index`` task, from the workers' logs), and what one INSERT of edited
records' chunks costs PostgreSQL in the HNSW-indexed table at that size (EXPLAIN ANALYZE, rolled back).

Per record: a phase's seconds over the records it concerns (the edits' over the edited records). Peak RSS is
sampled every 0.2 s over every process of each worker (``bench.pipeline.PeakMemory``); Redis's peak is its own
``used_memory_peak``.
At the largest size up to KEYWORDS_AT, the same first index runs again into a collection with keyword
indexing on (``search.keywords``), for what keyword indexing costs the bulk path; then a first load of a
third collection by a worker whose ``worker.index_time_limit`` its HNSW build outlasts, which must end once,
its build's progress shown by ``vectorsync status`` while it runs. The curve of per-record cost against
records, on log axes, is drawn to ``docs/img/scale.png``. Never run as a test.
"""

from __future__ import annotations

import argparse
import random
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis
import sqlalchemy as sa

from bench.cpu import CpuMeter
from bench.limit import measure
from bench.pictures import SCALE, draw_scale
from bench.pipeline import PeakMemory, notes
from bench.provider_calls import wait_done
from bench.report import Row, print_table
from bench.scale_figures import INSERTED, SHORT_BUILD_LIMIT, Measured, PastLimit, rows_of, series_of
from bench.servers import database
from store.broker.producer import Producer
from store.capture import control
from store.capture.sql import CHANNEL
from store.connect.postgres import engine_url
from store.contract import BUILD_INDEX
from store.settings import load_settings
from store.vectors.pgvector.building import build_memory_mb
from tests.crm import CrmTable, Psql, insert_notes, outbox_rows
from tests.services import redis_server
from tests.settings_files import sql_collection, worker_sections
from tests.workers import celery_worker, run_cli

__all__ = ["main", "run"]

SIZES = (10_000, 20_000, 100_000, 1_000_000)
#: Pool processes of each of the two workers.
PROCESSES = 1
#: Record ids per bulk batch (``worker.batch_size``, its default).
BATCH_SIZE = 100
QUICK_SIZES = (2_000, 10_000)
DIMENSIONS = 64
COLLECTION = "notes"
#: The keyword twin and the build past its limit run at the largest size up to this one.
KEYWORDS_AT = 100_000
TABLE = "bench_notes"
#: Rows per INSERT while the source is filled (untimed).
FILL = 20_000
#: A first load of a million records runs long: limits far above it, and a visibility timeout above them.
LIMITS: dict[str, float] = {"time_limit": 600, "index_time_limit": 14_400, "visibility_timeout": 1200}
#: With the extras, a first load of this collection runs with worker.index_time_limit SHORT_BUILD_LIMIT seconds.
SLOW_BUILD = f"{COLLECTION}_slow"
#: A build_index task's line in a worker's log, up to what happened to it.
BUILD_TASK = re.escape(f"Task {BUILD_INDEX}[") + r"[^]]+\]"


@dataclass(frozen=True)
class Workers:
    """How the two workers run: pool processes each, and record ids per bulk batch (``--processes``,
    ``--batch-size``: what they change is measured back to back against the defaults)."""

    processes: int = PROCESSES
    batch_size: int = BATCH_SIZE


def settings_text(broker: str, url: str, limits: dict[str, float] = LIMITS, *, batch_size: int = BATCH_SIZE) -> str:
    """The workers' settings: the fake embedder, no cache, the collection over TABLE, its keyword twin, and
    the collection whose build outlasts SHORT_BUILD_LIMIT."""
    sections = worker_sections(broker=broker, database=url, dimensions=DIMENSIONS, batch_size=batch_size, **limits)
    collections = "\n".join(
        sql_collection(database=url, table=TABLE, collection=name, max_tokens=256, overlap=32)
        for name in (COLLECTION, f"{COLLECTION}_kw", SLOW_BUILD)
    )
    return (
        f'{sections}\n[models.fake]\nprovider = "fake"\nmodel = "fake"\ndimensions = {DIMENSIONS}\n\n'
        f'[embeddings]\nchain = ["fake"]\ncache_ttl_days = 0\n{collections}\n'
        f"[collections.{COLLECTION}_kw.search]\nkeywords = true\n"
    )


def fill(url: str, records: int) -> None:
    """The source table with ``records`` notes of the pipeline bench's corpus (untimed)."""
    CrmTable(url, TABLE).close()
    rng = random.Random(3)
    sql = Psql(url)
    for start in range(1, records + 1, FILL):
        insert_notes(sql, TABLE, notes(rng, start, min(FILL, records + 1 - start)))
    sql.run(f'VACUUM ANALYZE "{TABLE}"')
    sql.close()


@contextmanager
def system(folder: Path, records: int, shape: Workers) -> Iterator[tuple[str, Path, redis.Redis]]:
    """Redis, PostgreSQL with the filled source, and the settings file: the database URL, the file, Redis."""
    with redis_server() as (redis_url, _), database(folder) as url:
        fill(url, records)
        config = folder / "vectorsync.toml"
        config.write_text(settings_text(redis_url, url, batch_size=shape.batch_size))
        client = redis.Redis.from_url(redis_url)
        try:
            yield url, config, client
        finally:
            client.close()


@contextmanager
def metered(meter: CpuMeter, m: Measured, phase: str) -> Iterator[None]:
    """The CPU seconds of what runs inside, into ``m.cpu[phase]``, split as ``meter.parts()``."""
    before = meter.parts()
    yield
    m.cpu[phase] = meter.since(before)


def build_seconds(folder: Path, workers: list[str]) -> float:
    """Seconds the workers' ``build_index`` tasks took so far, from their logs."""
    found = re.compile(BUILD_TASK + r" succeeded in ([0-9.]+)s")
    return sum(
        float(seconds)
        for name in workers
        for seconds in found.findall((folder / f"{name}.log").read_text(errors="replace"))
    )


def insert_cost(sql: Psql, table: str, ids: list[int]) -> float:
    """Seconds per chunk of one INSERT of ``ids``' chunks again, under new ids, into ``table`` with its indexes
    (EXPLAIN ANALYZE, rolled back): the insert's own time, without the SELECT feeding it; the best of 3."""
    statement = (
        f'EXPLAIN (ANALYZE, FORMAT JSON) INSERT INTO "{table}" '
        "(id, record_id, chunk, embedding, text, metadata, model, text_hash) "
        "SELECT id || '+', record_id || '+', chunk, embedding, text, metadata, model, text_hash "
        f'FROM "{table}" WHERE record_id = ANY(%s)'
    )
    best = float("inf")
    for _ in range(3):
        with sql.conn.transaction(force_rollback=True):
            (plan,) = sql.run(statement, ([str(i) for i in ids],))[0][0]
        feed = plan["Plan"]["Plans"][0]
        chunks = int(feed["Actual Rows"])
        if chunks == 0:
            raise RuntimeError(f"no chunks of records {ids[:5]}... in {table} to insert again")
        best = min(best, (plan["Execution Time"] - feed["Actual Total Time"]) / 1000 / chunks)
    return best


def timed_run(producer: Producer, start_run: str | None = None, *, collection: str = COLLECTION) -> float:
    """Seconds from sending a reindex (or from ``start_run``'s id being sent) to its run's end, done."""
    start = time.perf_counter()
    run_id = start_run or producer.reindex_all(collection)
    wait_done(producer, run_id, timeout=14_400)
    return time.perf_counter() - start


def edit(sql: Psql, ids: list[int], marker: str) -> None:
    """One UPDATE of ``ids``: ``marker`` first in each body, ``updated_at`` moved."""
    sql.run(f'UPDATE "{TABLE}" SET body = %s || body, updated_at = now() WHERE id = ANY(%s)', (f"{marker} ", ids))


def wait_for_relays(sql: Psql, relays: int) -> None:
    """Until the relays in the workers' main processes LISTEN on the outbox capture has just made: a relay looks
    for a missing outbox every ``MISSING_OUTBOX_SECONDS`` (10 s), which the burst would otherwise include. Runs
    before 2026-12-05 slept 2 s here, so their bursts below 1,000,000 records hold 0 to 10 s of that wait."""
    start = time.perf_counter()
    while sql.run("SELECT count(*) FROM pg_stat_activity WHERE query = %s", (f"LISTEN {CHANNEL}",))[0][0] < relays:
        if time.perf_counter() - start > 60:
            raise RuntimeError(f"{relays} capture relays did not find the outbox within 60 s")
        time.sleep(0.2)


def stored_with(sql: Psql, table: str, ids: list[int], marker: str) -> int:
    """How many of ``ids`` have ``marker`` in a stored chunk (the first chunk may be the title alone)."""
    found = sql.run(
        f'SELECT count(DISTINCT record_id) FROM "{table}" WHERE record_id = ANY(%s) AND strpos(text, %s) > 0',
        ([str(i) for i in ids], marker),
    )
    return int(found[0][0])


def sizes_of(sql: Psql, table: str) -> tuple[int, int, int]:
    """The collection's chunks, its table's bytes with indexes, and the state tables' bytes."""
    chunks = int(sql.run(f'SELECT count(*) FROM "{table}"')[0][0])
    table_bytes = int(sql.run("SELECT pg_total_relation_size(%s::regclass)", (table,))[0][0])
    state = sql.run(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind = 'r' AND n.nspname = current_schema() AND c.relname LIKE 'vectorsync\\_%'"
    )
    return chunks, table_bytes, int(state[0][0])


def past_limit(folder: Path, broker: str, url: str) -> PastLimit:
    """A first load of SLOW_BUILD by one worker whose ``index_time_limit`` its HNSW build outlasts: the run's
    end, how many builds started (the worker's log), and the build lines ``vectorsync status`` showed."""
    config = folder / "short-build.toml"
    config.write_text(settings_text(broker, url, {**LIMITS, "index_time_limit": SHORT_BUILD_LIMIT}))
    producer = Producer(load_settings(config))
    progress: list[str] = []
    try:
        with celery_worker(config, concurrency=1, name="short"):
            start = time.perf_counter()
            run_id = producer.reindex_all(SLOW_BUILD)
            while not (run := producer.reindex_status(run_id)).status.ended:
                if time.perf_counter() - start > 3600:
                    raise RuntimeError(f"the run {run_id} of {SLOW_BUILD} has not ended after an hour")
                shown = run_cli(config, "status", timeout=120).stdout
                progress += [line.strip() for line in shown.splitlines() if "builds its index" in line]
            seconds = time.perf_counter() - start
    finally:
        producer.close()
    log = (folder / "short.log").read_text(errors="replace")
    tasks = len(re.findall(BUILD_TASK + " received", log))
    builds = len(re.findall(r"building \S+_embedding_idx of ", log))
    return PastLimit(str(run.status), run.error or "", tasks, builds, progress, seconds)


def one_size(folder: Path, records: int, *, extras: bool = False, shape: Workers = Workers()) -> Measured:
    """Every phase at ``records`` records, in a system of its own, the workers run as ``shape`` says; with
    ``extras``, the keyword twin's first index and the build past its limit too."""
    m = Measured(records)
    rng = random.Random(records)
    with system(folder, records, shape) as (url, config, cache), ExitStack() as stack:
        settings = load_settings(config)
        table = settings.vectors.table_prefix + COLLECTION
        producer = Producer(settings)
        stack.callback(producer.close)
        workers = {
            name: stack.enter_context(celery_worker(config, concurrency=shape.processes, name=name))
            for name in ("w1", "w2")
        }
        peaks = {name: PeakMemory(process.pid) for name, process in workers.items()}
        sql = Psql(url)
        stack.callback(sql.close)
        engine = sa.create_engine(engine_url(url))
        stack.callback(engine.dispose)
        meter = CpuMeter(engine)

        with metered(meter, m, "first index"):
            m.seconds["first index"] = timed_run(producer)
        m.own_build = build_seconds(folder, list(workers))
        m.chunks, m.table_bytes, _ = sizes_of(sql, table)
        memory = build_memory_mb(m.chunks, dimensions=DIMENSIONS, m=settings.vectors.hnsw_m)
        limit = measure(
            url, table, build_memory_mb=memory, build_workers=settings.vectors.index_build_workers, meter=meter
        )
        m.seconds["limit"] = limit.seconds
        m.seconds["limit: COPY"], m.seconds["limit: index builds"] = limit.copy, limit.build
        m.cpu["limit"] = limit.cpu or (0.0, 0.0)
        m.seconds["unchanged"] = timed_run(producer)

        ids = rng.sample(range(1, records + 1), 2 * max(1, records // 100))
        edited, captured = ids[: len(ids) // 2], ids[len(ids) // 2 :]
        edit(sql, edited, "editedonce")
        with metered(meter, m, "1% edit"):
            m.seconds["1% edit"] = timed_run(producer)
        if stored_with(sql, table, edited, "editedonce") != len(edited):
            raise RuntimeError("the 1% edit's reindex ended done without every edited record stored")
        m.seconds["reconcile"] = timed_run(producer, producer.reconcile(COLLECTION))

        control.enable(settings, COLLECTION)
        wait_for_relays(sql, len(workers))
        with metered(meter, m, "capture burst"):
            start = time.perf_counter()
            edit(sql, captured, "capturedonce")
            while outbox_rows(sql, COLLECTION) or stored_with(sql, table, captured, "capturedonce") != len(captured):
                if time.perf_counter() - start > 3600:
                    raise RuntimeError("the capture burst was not indexed within an hour")
                time.sleep(0.2)
            m.seconds["capture burst"] = time.perf_counter() - start
        control.disable(settings, COLLECTION)
        m.insert_per_chunk = insert_cost(sql, table, captured[:INSERTED])

        for command in ("status", "doctor"):
            start = time.perf_counter()
            result = run_cli(config, command, timeout=600)
            m.seconds[command] = time.perf_counter() - start
            if result.returncode not in (0, 1):
                raise RuntimeError(f"vectorsync {command} failed: {result.stderr[-2000:]}")

        if extras:
            m.keywords_first = timed_run(producer, collection=f"{COLLECTION}_kw")
        m.worker_rss = {name: peak.stop() for name, peak in peaks.items()}
        m.redis_peak = int(cache.info("memory")["used_memory_peak"])
        _, _, m.state_bytes = sizes_of(sql, table)
        stack.close()  # the workers stop; the servers stay for the build past its limit
        if extras:
            m.past_limit = past_limit(folder, settings.broker.url, url)
    return m


def run(
    quick: bool = False,
    sizes: tuple[int, ...] | None = None,
    picture: Path | None = SCALE,
    shape: Workers = Workers(),
) -> list[Row]:
    measured = []
    sizes = sizes or (QUICK_SIZES if quick else SIZES)
    extras_at = max((s for s in sizes if s <= KEYWORDS_AT), default=None)
    for records in sizes:
        with tempfile.TemporaryDirectory(prefix="vsscale") as folder:
            started = time.perf_counter()
            measured.append(one_size(Path(folder), records, extras=records == extras_at, shape=shape))
            print(f"-- scale {records:,}: {time.perf_counter() - started:.0f} s", flush=True)
    if picture is not None and not quick:
        draw_scale(series_of(measured), picture)
    return rows_of(measured)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--picture", type=Path, default=SCALE)
    parser.add_argument("--processes", type=int, default=PROCESSES, help="pool processes of each of the two workers")
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE, help="record ids per bulk batch")
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    rows = run(args.quick, None if args.quick else sizes, args.picture, Workers(args.processes, args.batch_size))
    print_table(rows)
    for row in rows:  # what the table leaves out; `python -m bench` keeps it in results.json
        if row.detail:
            print(f"{row.section} | {row.name}: {row.detail}")


if __name__ == "__main__":
    main()
