"""Benchmark the batch lane: one first load bought through the provider's batch endpoint (``reindex --batch``)
beside the same first load bought through the failover chain, and live ``index_record`` latency while a batch-lane
run goes on, on real Redis, PostgreSQL+pgvector and two celery worker processes, embedding through the tests'
OpenAI-protocol server, which speaks the Batch API and counts what it served, synchronously and by batch.

    .venv/bin/python -m bench.lane [--quick] [--keep DIR]

One SQL source of 20,000 records (2,000 with ``--quick``) read by two collections of the same settings, one
loaded through each lane, the embedding cache flushed before each run so that both buy every text. The model is
priced at 0.02 a million tokens, its batch lane at 0.01. For each lane: the run's bill (``ledger.run_spend``),
chunks lost and duplicated against the source, every record current, its wall time; for the batch lane also the
texts of its collection bought synchronously while it ran, and each text bought once (the fake's batch
``usage`` against the distinct texts' cl100k tokens). Jobs take ``BATCH_SECONDS`` at the fake (OpenAI's take up
to 24 h), and the lane looks at them every ``POLL_SECONDS``.

Live latency: a third collection of a few hundred records; one at a time, a record is edited and sent with
``index_record``, and timed from the send until its new text is stored: ``SAMPLES`` times with no run going on,
then back to back for as long as each lane's run goes on (the same live load beside both runs). Live work goes
to the live queue, a run's batches and looks to the bulk queue.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import redis
import sqlalchemy as sa

from bench.bill_budget import chunks_off, rows_of
from bench.pipeline import LIMITS, notes
from bench.provider_calls import wait_done
from bench.report import Row, print_table
from bench.targets import judged
from store.broker.producer import Producer
from store.calls.spend import Spent, total
from store.connect.postgres import engine_url
from store.contract import BULK_QUEUE, LIVE_QUEUE
from store.settings import Settings, load_settings
from tests.crm import CrmTable, expected_chunks, stored_chunks
from tests.fake_openai import FakeOpenAI, cl100k_tokens
from tests.services import embedded_postgres, redis_server
from tests.settings_files import settings_toml, sql_collection
from tests.workers import celery_worker

__all__ = ["run"]

SECTION = "lane"
PRICE, BATCH_PRICE = 0.02, 0.01
#: Seconds a job takes at the fake server, and between two looks of the lane at its jobs.
BATCH_SECONDS, POLL_SECONDS = 30.0, 1.0
WORKER_BATCH, LIVE_RECORDS = 100, 300
SAMPLES = 100
LANES = ("batched", "synced")
MODEL = f"""[models.fake_openai]
price_per_million_tokens = {PRICE}"""
LANE = f"""
[models.fake_openai.batch]
price_per_million_tokens = {BATCH_PRICE}
poll_seconds = {POLL_SECONDS}
"""


@dataclass
class Loaded:
    """One lane's first load: its run, bill, what the store holds against the source, and its live samples."""

    lane: str
    records: int
    seconds: float
    spent: Spent
    lost: int
    duplicated: int
    current: bool
    live: list[tuple[float, str]]
    phases: dict[str, float] = field(default_factory=dict)


@dataclass
class Rig:
    settings: Settings
    database: str
    openai: FakeOpenAI
    crm: CrmTable
    live: CrmTable
    flush: Callable[[], object]
    rng: random.Random = field(default_factory=lambda: random.Random(23))
    edits: int = 0

    def table(self, collection: str) -> str:
        return self.settings.vectors.table_prefix + collection

    def texts(self, collection: str) -> set[str]:
        return {text for text, _ in expected_chunks(self.settings, collection, self.crm.rows()).values()}


def _indexed(engine: sa.Engine, table: str, record: int, marker: str) -> bool:
    query = sa.text(f'SELECT 1 FROM "{table}" WHERE id = :chunk AND position(:marker in text) > 0')  # bench's name
    with engine.connect() as conn:
        return conn.execute(query, {"chunk": f"{record}:0", "marker": marker}).first() is not None


def _sample(rig: Rig, producer: Producer, engine: sa.Engine) -> float:
    """One live edit: a record of ``live`` given a new body, sent with index_record; seconds until it is stored."""
    rig.edits += 1
    record, marker = rig.rng.randint(1, LIVE_RECORDS), f"edited{rig.edits}x"
    words = " ".join(rig.rng.choice(["renewal", "pricing", "call"]) for _ in range(4))
    rig.live.update(record, body=f"{marker} {words}")
    start = time.perf_counter()
    producer.index_record("live", str(record))
    while not _indexed(engine, rig.table("live"), record, marker):
        if time.perf_counter() - start > 120:
            raise RuntimeError(f"live edit {marker} of record {record} not stored after 120 s")
        time.sleep(0.01)
    return time.perf_counter() - start


def _live(rig: Rig, producer: Producer, going: Callable[[], str | None], count: int = 0) -> list[tuple[float, str]]:
    """Live samples, each with the phase ``going()`` said when it was sent: ``count`` of them, or (0) back to back
    until ``going()`` says None."""
    engine = sa.create_engine(engine_url(rig.database))
    samples: list[tuple[float, str]] = []
    try:
        while (phase := going()) is not None and (count == 0 or len(samples) < count):
            samples.append((_sample(rig, producer, engine), phase))
            time.sleep(0.1)
    finally:
        engine.dispose()
    return samples


class Watch:
    """A run watched in a thread of its own: its end (by its own producer), and for a batch-lane run the fake's
    side of it (job sent, job ended), each with the seconds since the run started."""

    def __init__(self, settings: Settings, openai: FakeOpenAI, run_id: str, start: float) -> None:
        self.openai, self.run_id, self.start = openai, run_id, start
        self.phases: dict[str, float] = {}
        self.error: BaseException | None = None
        self._settings = settings
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def phase(self) -> str | None:
        """None once the run ended; else where it is."""
        if "ended" in self.phases:
            return None
        if "job ended" in self.phases:
            return "writing"
        return "job out" if "job sent" in self.phases else "gathering"

    def _watch(self) -> None:
        producer = Producer(self._settings)
        stop = threading.Event()
        try:
            seen = threading.Thread(target=self._jobs, args=(stop,), daemon=True)
            seen.start()
            wait_done(producer, self.run_id)
        except BaseException as exc:  # handed to the bench's thread
            self.error = exc
        finally:
            self.phases["ended"] = time.perf_counter() - self.start
            stop.set()
            producer.close()

    def _jobs(self, stop: threading.Event) -> None:
        while not stop.wait(0.1):
            sent = any(call == ("POST", "/v1/batches") for call in list(self.openai.batch_api_calls))
            if sent:
                self.phases.setdefault("job sent", time.perf_counter() - self.start)
            if sent and self.openai.batch_served_lines:
                self.phases.setdefault("job ended", time.perf_counter() - self.start)

    def join(self) -> dict[str, float]:
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.phases


def _load(rig: Rig, collection: str, records: int) -> tuple[Loaded, str]:
    """A first load of ``collection``, through the batch lane for ``batched``, with live samples beside it."""
    rig.flush()  # the cache empty: the run buys every text
    producer = Producer(rig.settings)
    try:
        start = time.perf_counter()
        run_id = producer.reindex_all(collection, batch=collection == "batched")
        watch = Watch(rig.settings, rig.openai, run_id, start)
        live = _live(rig, producer, watch.phase)
        phases = watch.join()
        spent = total(producer.ledger.run_spend(run_id))
    finally:
        producer.close()
    expected, stored = (
        expected_chunks(rig.settings, collection, rig.crm.rows()),
        stored_chunks(rig.database, rig.table(collection)),
    )
    lost, duplicated = chunks_off(expected, stored, rows_of(rig.database, rig.table(collection)))
    lane = "batch lane" if collection == "batched" else "sync lane"
    loaded = Loaded(lane, records, phases["ended"], spent, lost, duplicated, stored == expected, live, phases)
    return loaded, run_id


def _p95(samples: list[tuple[float, str]], phase: str | None = None) -> float:
    took = [s for s, p in samples if phase is None or p == phase]
    return float(np.percentile(took, 95)) if took else float("nan")


def _check(name: str, value: float, unit: str, target: str, ok: bool, detail: str, ratio: float | None = None) -> Row:
    """A row of a target of this section's own (no measure of ``bench.targets``)."""
    return Row(SECTION, name, value, unit, ratio, target, ok, detail)


def _lane_rows(loaded: Loaded) -> list[Row]:
    name, s, lost, duplicated = loaded.lane, loaded.spent, loaded.lost, loaded.duplicated
    return [
        Row(SECTION, f"{name}: tokens bought", s.tokens, "tokens", detail=f"cost {s.cost or 0:.6f}; {s.calls} calls"),
        _check(f"{name}: chunks lost / duplicated", lost + duplicated, "chunks", "0/0", lost == duplicated == 0,
               f"lost {lost}, duplicated {duplicated}"),
        _check(f"{name}: every record current", int(loaded.current), "equal", "1", loaded.current, "stored == source"),
    ]  # fmt: skip


def _rows_of(batched: Loaded, synced: Loaded, bought: dict[str, int], idle: list[tuple[float, str]]) -> list[Row]:
    b, s, needed = batched.spent, synced.spent, bought["needed"]
    ratio = (b.cost or 0.0) / (s.cost or float("inf"))
    prices = f"prices {PRICE} and {BATCH_PRICE} a million tokens"
    once = bought["served"] == needed and bought["twice"] == 0 and bought["lines"] == bought["texts"]
    phases = batched.phases
    rows = [
        Row(
            SECTION,
            f"first load, {batched.records:,} records: batch lane cost against the sync lane",
            b.cost or 0.0,
            "cost",
            ratio,
            detail=f"batch {b.tokens:,} tokens, {b.cost or 0:.6f}; sync {s.tokens:,}, {s.cost or 0:.6f}; {prices}",
            **judged("batch lane cost against the sync lane", ratio),
        ),
        _check("tokens: batch lane against the sync lane", b.tokens, "tokens", "equal", b.tokens == s.tokens == needed,
               f"distinct texts' cl100k tokens {needed:,}", b.tokens / s.tokens if s.tokens else None),
        *_lane_rows(batched),
        *_lane_rows(synced),
        _check("batch lane: texts of its collection bought synchronously", bought["sync texts"], "texts", "0",
               bought["sync texts"] == 0, f"{bought['served calls']} embeddings calls served meanwhile (the live "
               f"edits'), {bought['sync calls']} of them with its texts; {bought['jobs']} job(s)"),
        _check("batch lane: each text bought once", bought["served"], "tokens", "== distinct texts' tokens", once,
               f"{bought['texts']:,} distinct texts, {bought['lines']:,} embedded by jobs, {bought['twice']} twice",
               bought["served"] / needed),
        Row(SECTION, "sync lane: wall time", synced.seconds, "s", detail="live edits sent beside it"),
        Row(SECTION, "batch lane: wall time", batched.seconds, "s", batched.seconds / synced.seconds,
            detail=f"job sent at {phases.get('job sent', 0):.1f} s, ended by the fake's clock at "
            f"{phases.get('job ended', 0):.1f} s (batch_seconds {BATCH_SECONDS:g}, poll_seconds {POLL_SECONDS:g}); "
            "live edits sent beside it; ratio against the sync lane's"),
    ]  # fmt: skip
    return rows + _live_rows(batched, synced, idle)


def _live_rows(batched: Loaded, synced: Loaded, idle: list[tuple[float, str]]) -> list[Row]:
    base = _p95(idle)
    by_phase = ", ".join(
        f"{phase} {_p95(batched.live, phase):.3f} s (n={sum(p == phase for _, p in batched.live)})"
        for phase in ("gathering", "job out", "writing")
    )
    during, under_sync = _p95(batched.live), _p95(synced.live)
    return [
        Row(
            SECTION,
            "live index_record send-to-stored p95, no run",
            base,
            "s",
            detail=f"{len(idle)} edits, p50 {float(np.median([s for s, _ in idle])):.3f} s",
        ),
        Row(
            SECTION,
            f"live index_record send-to-stored p95 during a {batched.records:,}-record batch-lane run",
            during,
            "s",
            during / base,
            detail=f"{len(batched.live)} edits; by phase: {by_phase}; ratio against no run; "
            f"{during / under_sync:.2f}x the p95 during the sync-lane run",
            **judged("live update p95 under a reindex", during),
        ),
        Row(
            SECTION,
            f"live index_record send-to-stored p95 during a {synced.records:,}-record sync-lane run",
            under_sync,
            "s",
            under_sync / base,
            detail=f"{len(synced.live)} edits; ratio against no run",
        ),
    ]


def _bought(rig: Rig, requests_before: int) -> dict[str, int]:
    """What the fake served the batch lane's run: its jobs' texts and tokens, and the collection's texts bought
    synchronously (the chain's requests since ``requests_before``)."""
    texts = rig.texts("batched")
    jobs = rig.openai.batch_inputs()
    lines = [text for job in jobs for text in job]
    sync = [r for r in rig.openai.requests[requests_before:] if r.path.endswith("/embeddings")]
    carried = [r for r in sync if texts.intersection(r.inputs)]
    return {
        "texts": len(texts),
        "needed": sum(cl100k_tokens(text) for text in texts),
        "served": rig.openai.batch_served_tokens,
        "lines": len(lines),
        "twice": len(lines) - len(set(lines)),
        "jobs": len(jobs),
        "sync texts": len({t for r in carried for t in r.inputs} & texts),
        "sync calls": len(carried),
        "served calls": len(sync),
    }


def _configure(folder: Path, database: str, redis_url: str, openai: FakeOpenAI, tables: tuple[str, str]) -> Path:
    text = settings_toml(
        broker=redis_url,
        cache=redis_url.rsplit("/", 1)[0] + "/1",
        database=database,
        openai_url=openai.url,
        table=tables[0],
        collection="batched",
        dimensions=16,
        batch_size=WORKER_BATCH,
        limits=LIMITS,
        model="text-embedding-3-small",
        extra=sql_collection(database=database, table=tables[0], collection="synced")
        + sql_collection(database=database, table=tables[1], collection="live")
        + LANE,
    )
    config = folder / "vectorsync.toml"
    config.write_text(text.replace("[models.fake_openai]", MODEL, 1))
    return config


def run(quick: bool = False, keep: Path | None = None, *, live_worker: bool = False) -> list[Row]:
    """The live baseline, then a first load of 20,000 records (2,000 when ``quick``) through each lane."""
    records, samples = (2_000, 30) if quick else (20_000, SAMPLES)
    rng = random.Random(17)
    with ExitStack() as stack:
        folder = keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vsbench")))
        redis_url, _ = stack.enter_context(redis_server())
        database = stack.enter_context(embedded_postgres(folder / "pg"))
        openai = stack.enter_context(FakeOpenAI(dimensions=16, batch_seconds=BATCH_SECONDS))
        crm, live = CrmTable(database, "bench_lane"), CrmTable(database, "bench_lane_live")
        stack.callback(crm.close)
        stack.callback(live.close)
        for start in range(1, records + 1, 10_000):
            crm.insert(notes(rng, start, min(10_000, records + 1 - start), words=(8, 60)))
        live.insert(notes(rng, 1, LIVE_RECORDS, words=(8, 30)))
        config = _configure(folder, database, redis_url, openai, (crm.name, live.name))
        settings = load_settings(config)
        flush = redis.Redis.from_url(settings.cache.url).flushdb
        rig = Rig(settings, database, openai, crm, live, flush)
        if live_worker:  # the deploy files' answer for live latency: a worker of the live queue's own
            stack.enter_context(celery_worker(config, concurrency=1, name="bench-live", queues=(LIVE_QUEUE,)))
        queues = (BULK_QUEUE,) if live_worker else (LIVE_QUEUE, BULK_QUEUE)
        with celery_worker(config, concurrency=2, name="bench", queues=queues):
            producer = Producer(settings)
            try:
                wait_done(producer, producer.reindex_all("live"))
                idle = _live(rig, producer, lambda: "no run", samples)
            finally:
                producer.close()
            before = len(openai.requests)
            batched, _ = _load(rig, "batched", records)
            bought = _bought(rig, before)
            synced, _ = _load(rig, "synced", records)
    return _rows_of(batched, synced, bought, idle)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="2,000 records instead of 20,000")
    parser.add_argument("--keep", type=Path, help="a folder for the run's files (worker logs), kept")
    parser.add_argument(
        "--live-worker", action="store_true", help="a worker of the live queue alone beside the bulk one"
    )
    args = parser.parse_args()
    print_table(run(quick=args.quick, keep=args.keep, live_worker=args.live_worker))
