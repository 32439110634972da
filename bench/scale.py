"""A million records through the whole pipeline: each phase's cost per record at 10,000 to 1,000,000 records,
the storage limit at each size, and what each part holds in memory and on disk.

    .venv/bin/python -m bench.scale [--sizes 10000,20000,100000,1000000] [--quick]

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
from dataclasses import dataclass, field
from pathlib import Path

import redis
import sqlalchemy as sa

from bench.cpu import CpuMeter
from bench.limit import measure
from bench.pipeline import PeakMemory, notes
from bench.provider_calls import wait_done
from bench.report import Row, print_table
from bench.servers import database
from producer.client import Producer
from store.capture import control
from store.capture.sql import CHANNEL
from store.connect.postgres import engine_url
from store.settings import load_settings
from store.vectors.pgvector.table import build_memory_mb
from tests.services import redis_server
from tests.workers import (
    CrmTable,
    Psql,
    celery_worker,
    insert_notes,
    outbox_rows,
    run_cli,
    sql_collection,
    worker_sections,
)

__all__ = ["main", "run"]

SIZES = (10_000, 20_000, 100_000, 1_000_000)
#: Pool processes of each of the two workers.
PROCESSES = 1
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
#: With the extras, a first load of this collection runs with worker.index_time_limit SHORT_BUILD_LIMIT seconds,
#: less than its HNSW build takes: it must end once, done or failed, its build's progress shown by `status`.
SLOW_BUILD = f"{COLLECTION}_slow"
SHORT_BUILD_LIMIT = 15
#: The growth a phase's per-record cost may show from the smallest size to the largest.
GROWTH = 1.2
PICTURE = Path("docs/img/scale.png")
#: Records whose chunks one INSERT writes again, for what the HNSW-indexed table's writes cost at each size.
INSERTED = 200
#: Phases whose CPU seconds are measured, and the CPU of the limit.
METERED = ("first index", "limit", "1% edit", "capture burst")
#: Phases whose per-record cost is over the edited records, not all of them.
EDITS = ("1% edit", "capture burst")
PHASES = ("first index", "limit", "unchanged", "1% edit", "reconcile", "capture burst")


@dataclass
class Measured:
    """One size's figures: seconds per phase, and what the parts held."""

    records: int
    chunks: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    worker_rss: dict[str, int] = field(default_factory=dict)
    redis_peak: int = 0
    table_bytes: int = 0
    state_bytes: int = 0
    keywords_first: float | None = None
    past_limit: PastLimit | None = None
    #: CPU seconds of a phase: the bench's process tree (the workers, Redis, the bench), and PostgreSQL's.
    cpu: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: Seconds of the first index's own index builds (its build_index tasks).
    own_build: float = 0.0
    #: Seconds per chunk of one INSERT of INSERTED records' chunks into the HNSW-indexed table.
    insert_per_chunk: float = 0.0

    def per_record(self, phase: str, seconds: float | None = None) -> float:
        edited = max(1, self.records // 100)
        return (self.seconds[phase] if seconds is None else seconds) / (edited if phase in EDITS else self.records)


@dataclass
class PastLimit:
    """How a first load whose build outlasted ``worker.index_time_limit`` went."""

    status: str
    error: str
    build_tasks: int
    builds_started: int
    progress: list[str]
    seconds: float


def settings_text(broker: str, url: str, limits: dict[str, float] = LIMITS) -> str:
    """The workers' settings: the fake embedder, no cache, the collection over TABLE, its keyword twin, and
    the collection whose build outlasts SHORT_BUILD_LIMIT."""
    sections = worker_sections(broker=broker, database=url, dimensions=DIMENSIONS, batch_size=100, **limits)
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
def system(folder: Path, records: int) -> Iterator[tuple[str, Path, redis.Redis]]:
    """Redis, PostgreSQL with the filled source, and the settings file: the database URL, the file, Redis."""
    with redis_server() as (redis_url, _), database(folder) as url:
        fill(url, records)
        config = folder / "vectorsync.toml"
        config.write_text(settings_text(redis_url, url))
        client = redis.Redis.from_url(redis_url)
        try:
            yield url, config, client
        finally:
            client.close()


class Phases:
    """Each phase's CPU seconds into ``m.cpu``, split by ``meter.parts()``."""

    def __init__(self, m: Measured, meter: CpuMeter) -> None:
        self.m, self.meter = m, meter

    @contextmanager
    def cpu(self, phase: str) -> Iterator[None]:
        ours, postgres = self.meter.parts()
        yield
        after = self.meter.parts()
        self.m.cpu[phase] = (after[0] - ours, after[1] - postgres)


def build_seconds(folder: Path, workers: list[str]) -> float:
    """Seconds the workers' ``build_index`` tasks took so far, from their logs."""
    found = re.compile(r"Task vectorsync\.build_index\[[^]]+\] succeeded in ([0-9.]+)s")
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
    tasks = len(re.findall(r"Task vectorsync\.build_index\[[^]]+\] received", log))
    builds = len(re.findall(r"building \S+_embedding_idx of ", log))
    return PastLimit(str(run.status), run.error or "", tasks, builds, progress, seconds)


def one_size(folder: Path, records: int, *, extras: bool = False, processes: int = PROCESSES) -> Measured:
    """Every phase at ``records`` records, in a system of its own; with ``extras``, the keyword twin's first
    index and the build past its limit too."""
    m = Measured(records)
    rng = random.Random(records)
    with system(folder, records) as (url, config, cache), ExitStack() as stack:
        settings = load_settings(config)
        table = settings.vectors.table_prefix + COLLECTION
        producer = Producer(settings)
        stack.callback(producer.close)
        workers = {
            name: stack.enter_context(celery_worker(config, concurrency=processes, name=name)) for name in ("w1", "w2")
        }
        peaks = {name: PeakMemory(process.pid) for name, process in workers.items()}
        sql = Psql(url)
        stack.callback(sql.close)
        engine = sa.create_engine(engine_url(url))
        stack.callback(engine.dispose)
        phases = Phases(m, CpuMeter(engine))

        with phases.cpu("first index"):
            m.seconds["first index"] = timed_run(producer)
        m.own_build = build_seconds(folder, list(workers))
        m.chunks, m.table_bytes, _ = sizes_of(sql, table)
        memory = build_memory_mb(m.chunks, dimensions=DIMENSIONS, m=settings.vectors.hnsw_m)
        limit = measure(
            url, table, build_memory_mb=memory, build_workers=settings.vectors.index_build_workers, meter=phases.meter
        )
        m.seconds["limit"] = limit.seconds
        m.seconds["limit: COPY"], m.seconds["limit: index builds"] = limit.copy, limit.build
        m.cpu["limit"] = (0.0, limit.cpu or 0.0)  # the limit's work is PostgreSQL's; the split is not kept
        m.seconds["unchanged"] = timed_run(producer)

        ids = rng.sample(range(1, records + 1), 2 * max(1, records // 100))
        edited, captured = ids[: len(ids) // 2], ids[len(ids) // 2 :]
        edit(sql, edited, "editedonce")
        with phases.cpu("1% edit"):
            m.seconds["1% edit"] = timed_run(producer)
        if stored_with(sql, table, edited, "editedonce") != len(edited):
            raise RuntimeError("the 1% edit's reindex ended done without every edited record stored")
        m.seconds["reconcile"] = timed_run(producer, producer.reconcile(COLLECTION))

        control.enable(settings, COLLECTION)
        wait_for_relays(sql, len(workers))
        with phases.cpu("capture burst"):
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


def rows_of(measured: list[Measured]) -> list[Row]:
    rows = []
    for m in measured:
        section = f"scale {m.records:,}"
        for phase in PHASES:
            seconds = m.seconds[phase]
            unit = "edited record" if phase in EDITS else "record"
            rows.append(Row(section, phase, seconds, "s", detail=f"{m.per_record(phase) * 1e6:,.0f} us per {unit}"))
        ratio = m.seconds["limit"] / m.seconds["first index"]
        rows.append(
            Row(
                section,
                f"first index of {m.records:,} records ({m.chunks:,} chunks) against the limit",
                ratio,
                "x",
                ratio=ratio,
                target=">= 0.8x",
                ok=ratio >= 0.8,
            )
        )
        for part in ("limit: COPY", "limit: index builds"):
            if part in m.seconds:  # not in runs before the split was kept
                rows.append(
                    Row(section, part, m.seconds[part], "s", detail=f"of the limit's {m.seconds['limit']:.1f} s")
                )
        rows += bound_rows(section, m)
        for command in ("status", "doctor"):
            rows.append(Row(section, f"vectorsync {command}: wall", m.seconds[command], "s"))
        peak = max(m.worker_rss.values())
        rows.append(
            Row(
                section,
                "peak worker RSS (any process of either worker)",
                peak / 2**20,
                "MiB",
                target="< 400 MiB",
                ok=peak < 400 * 2**20,
                detail=", ".join(f"{name} {rss / 2**20:.0f} MiB" for name, rss in sorted(m.worker_rss.items())),
            )
        )
        rows.append(Row(section, "Redis used_memory_peak", m.redis_peak / 2**20, "MiB"))
        rows.append(Row(section, "PostgreSQL bytes per chunk (table and its indexes)", m.table_bytes / m.chunks, "B"))
        rows.append(Row(section, "state tables (ledger, runs, spend, ...)", m.state_bytes / 2**20, "MiB"))
        if m.keywords_first is not None:
            ratio = m.keywords_first / m.seconds["first index"]
            rows.append(
                Row(
                    section,
                    "first index with keyword indexing on (search.keywords) / off",
                    m.keywords_first,
                    "s",
                    ratio=ratio,
                    detail=f"off {m.seconds['first index']:.1f} s: keyword indexing costs the bulk path {ratio:.2f}x",
                )
            )
        if m.past_limit is not None:
            slow = m.past_limit
            shown = slow.progress[-1] if slow.progress else "nothing"
            rows.append(
                Row(
                    section,
                    f"first load, HNSW build past index_time_limit = {SHORT_BUILD_LIMIT} s: ended {slow.status}",
                    slow.builds_started,
                    "HNSW builds started",
                    target="ends once, the build started once, its progress shown",
                    ok=slow.status in ("done", "failed") and slow.builds_started == 1 and bool(slow.progress),
                    detail=f"{slow.seconds:.0f} s; {slow.build_tasks} build tasks; {len(slow.progress)} status lines "
                    f"showed the build, the last: {shown!r}; the run's error: {slow.error!r}",
                )
            )
    if len(measured) > 1:
        small, large = measured[0], measured[-1]
        for phase in PHASES:
            growth = large.per_record(phase) / small.per_record(phase)
            rows.append(
                Row(
                    "scale growth",
                    f"{phase}: per-record cost at {large.records:,} / at {small.records:,}",
                    growth,
                    "x",
                    ratio=growth,
                    target=f"<= {GROWTH}x",
                    ok=growth <= GROWTH,
                )
            )
        for part in ("limit: COPY", "limit: index builds"):
            if part in small.seconds and part in large.seconds:
                growth = (large.seconds[part] / large.records) / (small.seconds[part] / small.records)
                rows.append(
                    Row(
                        "scale growth",
                        f"{part}: per-record cost at {large.records:,} / at {small.records:,}",
                        growth,
                        "x",
                    )
                )
        rows += bound_growth(small, large)
        redis_growth = large.redis_peak / small.redis_peak
        rows.append(
            Row(
                "scale growth",
                f"Redis used_memory_peak at {large.records:,} / at {small.records:,}",
                redis_growth,
                "x",
                ratio=redis_growth,
                target="bounded",
            )
        )
    return rows


def bound_rows(section: str, m: Measured) -> list[Row]:
    """What bounds the first index and the edits at one size: CPU seconds, the pipeline's own build, and what
    an INSERT into the HNSW-indexed table costs."""
    ours, postgres = m.cpu["first index"]
    limit = sum(m.cpu["limit"])
    loading = m.seconds["first index"] - m.own_build
    rows = [
        Row(
            section,
            "first index: CPU seconds, all processes (the limit's in the detail)",
            ours + postgres,
            "CPU s",
            ratio=limit / (ours + postgres),
            detail=f"workers, Redis and the bench {ours:.1f} s ({ours / m.records * 1e6:,.0f} us per record), "
            f"PostgreSQL {postgres:.1f} s ({postgres / m.records * 1e6:,.0f} us per record); the limit {limit:.1f} s: "
            f"limit / first index in CPU seconds {limit / (ours + postgres):.3f}",
        ),
        Row(
            section,
            "first index: its own index builds (build_index)",
            m.own_build,
            "s",
            detail=f"loading before them {loading:.1f} s ({loading / m.records * 1e6:,.0f} us per record); "
            f"the limit's builds {m.seconds['limit: index builds']:.1f} s",
        ),
    ]
    for phase in ("1% edit", "capture burst"):
        ours, postgres = m.cpu[phase]
        rows.append(
            Row(
                section,
                f"{phase}: CPU per edited record",
                m.per_record(phase, ours + postgres) * 1e3,
                "CPU ms",
                detail=f"workers, Redis and the bench {m.per_record(phase, ours) * 1e3:.2f} ms, "
                f"PostgreSQL {m.per_record(phase, postgres) * 1e3:.2f} ms",
            )
        )
    rows.append(
        Row(
            section,
            f"INSERT of {INSERTED} records' chunks into the HNSW-indexed table (EXPLAIN ANALYZE)",
            m.insert_per_chunk * 1e6,
            "us per chunk",
        )
    )
    return rows


def bound_growth(small: Measured, large: Measured) -> list[Row]:
    """How the measures of ``bound_rows`` grow from the smallest size to the largest."""
    name = f"per-record cost at {large.records:,} / at {small.records:,}"
    pairs = {
        "first index, CPU seconds of the workers, Redis and the bench": (
            large.cpu["first index"][0] / large.records,
            small.cpu["first index"][0] / small.records,
        ),
        "first index, CPU seconds of PostgreSQL": (
            large.cpu["first index"][1] / large.records,
            small.cpu["first index"][1] / small.records,
        ),
        "first index, loading before its own index builds": (
            (large.seconds["first index"] - large.own_build) / large.records,
            (small.seconds["first index"] - small.own_build) / small.records,
        ),
        "first index, its own index builds": (large.own_build / large.records, small.own_build / small.records),
    }
    for phase in ("1% edit", "capture burst"):
        for part, label in ((0, "of the workers, Redis and the bench"), (1, "of PostgreSQL")):
            pairs[f"{phase}, CPU seconds {label}"] = (
                large.per_record(phase, large.cpu[phase][part]),
                small.per_record(phase, small.cpu[phase][part]),
            )
    pairs["INSERT into the HNSW-indexed table, per chunk"] = (large.insert_per_chunk, small.insert_per_chunk)
    return [
        Row("scale growth", f"{label}: {name}", big / little, "x", ratio=big / little)
        for label, (big, little) in pairs.items()
        if little > 0
    ]


def draw(measured: list[Measured], path: Path = PICTURE) -> None:
    """Per-record cost of each phase against records, log axes, to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=120)
    sizes = [m.records for m in measured]
    for phase in PHASES:
        unit = " (per edited record)" if phase in EDITS else ""
        axes.plot(sizes, [m.per_record(phase) * 1e6 for m in measured], marker="o", label=phase + unit)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("records")
    axes.set_ylabel("microseconds per record")
    axes.set_title("vectorsync: each phase's cost per record as the collection grows")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8, loc="best")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)


def run(
    quick: bool = False,
    sizes: tuple[int, ...] | None = None,
    picture: Path | None = PICTURE,
    processes: int = PROCESSES,
) -> list[Row]:
    measured = []
    sizes = sizes or (QUICK_SIZES if quick else SIZES)
    extras_at = max((s for s in sizes if s <= KEYWORDS_AT), default=None)
    for records in sizes:
        with tempfile.TemporaryDirectory(prefix="vsscale") as folder:
            started = time.perf_counter()
            measured.append(one_size(Path(folder), records, extras=records == extras_at, processes=processes))
            print(f"-- scale {records:,}: {time.perf_counter() - started:.0f} s", flush=True)
    if picture is not None and not quick:
        draw(measured, picture)
    return rows_of(measured)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--picture", type=Path, default=PICTURE)
    parser.add_argument("--processes", type=int, default=PROCESSES, help="pool processes of each of the two workers")
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    rows = run(args.quick, None if args.quick else sizes, args.picture, args.processes)
    print_table(rows)
    for row in rows:  # what the table leaves out; `python -m bench` keeps it in results.json
        if row.detail:
            print(f"{row.section} | {row.name}: {row.detail}")


if __name__ == "__main__":
    main()
