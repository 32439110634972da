"""Benchmark the bill: ``--plan`` against the run that follows it, and the provider calls that vectors already
stored save, on real Redis, PostgreSQL+pgvector and two celery worker processes, embedding through the tests'
OpenAI-protocol server, which counts the calls and the tokens (cl100k, as OpenAI's ``usage``) it served.

    .venv/bin/python -m bench.bill [--quick]

One SQL source of 20,000 records (most of them one chunk long, so that a chunker change keeps about 90% of
the chunk texts), and five runs, each planned just before it: the first load, a reindex after editing 1% of
the bodies, one after editing 1% of the metadata alone, one after a chunker change (``max_tokens`` 64 to 96),
and a ``migrate`` to a second model entry serving the same model. Before the last three the embedding cache is
flushed, so only the store can spare a call: the metadata-only edit and the migration must make 0, the chunker
change ``ceil(chunk texts not stored / batch_size)`` within 1.02x. For each run: records, chunks, calls and
tokens planned against those done and served.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import resource
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import redis
import sqlalchemy as sa

from bench.report import Row, print_table
from producer.client import Producer
from store.client import Client
from store.plan import Plan
from store.settings import Settings, load_settings
from store.state.ledger import RunStatus
from tests.fake_openai import FakeOpenAI
from tests.services import embedded_postgres, redis_server
from tests.workers import CrmTable, celery_worker, expected_chunks, settings_toml, sql_collection
from worker.planning import PlanReading

__all__ = ["run"]

SECTION = "bill"
EMBED_BATCH, WORKER_BATCH = 64, 100
WORDS = ["onboarding", "rollout", "invoice", "renewal", "pricing", "discount", "contract", "meeting", "call"]
SAME_MODEL = """
[models.fake_openai_again]
provider = "openai"
model = "text-embedding-3-small"
dimensions = 16
base_url = "{url}"
timeout = 5
"""


@dataclass(frozen=True)
class Compared:
    """One run: what its plan said and what the run then did, as the ledger and the fake server counted it."""

    name: str
    planned: dict[str, int]
    done: dict[str, int]
    chunks_to_buy: int
    seconds_planned: float
    seconds_run: float

    def rows(self, *, zero: bool = False, ideal: bool = False) -> list[Row]:
        same = self.planned == self.done
        detail = (
            f"planned {self.planned}; done {self.done}; plan {self.seconds_planned:.1f} s, run {self.seconds_run:.1f} s"
        )
        rows = [Row(SECTION, f"plan = run: {self.name}", int(same), "equal", None, "1", same, detail)]
        calls = self.done["calls"]
        if zero:
            rows.append(Row(SECTION, f"calls, cache flushed: {self.name}", calls, "calls", None, "0", calls == 0, ""))
        if ideal:
            best = math.ceil(self.chunks_to_buy / EMBED_BATCH)
            ratio = calls / best if best else float(calls == 0)
            rows.append(
                Row(
                    SECTION,
                    f"calls, cache flushed: {self.name}",
                    calls,
                    "calls",
                    ratio,
                    "<= 1.02x",
                    ratio <= 1.02,
                    f"ideal ceil({self.chunks_to_buy} chunk texts not stored / {EMBED_BATCH}) = {best}",
                )
            )
        return rows


def _body(rng: random.Random, long: bool) -> str:
    words = rng.randint(70, 110) if long else rng.randint(8, 18)
    return " ".join(rng.choice(WORDS) + str(rng.randint(0, 999)) for _ in range(words))


def _plan(settings: Settings, collection: str, chain: list[str] | None = None) -> Plan:
    with Client(settings) as client, PlanReading(client) as reading:
        return client.plan(collection, reader=reading, chain=chain)


def _wait(producer: Producer, run_id: str, *, timeout: float = 900) -> Any:
    start = time.perf_counter()
    while not (progress := producer.reindex_status(run_id)).status.ended:
        if time.perf_counter() - start > timeout:
            raise RuntimeError(f"run {run_id} still {progress.status} after {timeout} s")
        time.sleep(0.1)
    if progress.status != RunStatus.DONE or progress.failed:
        raise RuntimeError(f"run {run_id} ended {progress.status}: {progress}")
    return progress


def _compare(
    name: str, settings: Settings, openai: FakeOpenAI, start: Callable[[Producer], str], chain: list[str] | None = None
) -> Compared:
    began = time.perf_counter()
    plan = _plan(settings, "notes", chain)
    planned_in = time.perf_counter() - began
    calls, tokens = openai.served_calls, openai.served_tokens
    producer = Producer(settings)
    try:
        began = time.perf_counter()
        progress = _wait(producer, start(producer))
        ran = time.perf_counter() - began
    finally:
        producer.close()
    planned = {
        "records": plan.records,
        "indexed": plan.new + plan.changed,
        "calls": plan.calls,
        "tokens": plan.tokens,
    }
    done = {
        "records": progress.total,
        "indexed": progress.done,
        "calls": openai.served_calls - calls,
        "tokens": openai.served_tokens - tokens,
    }
    return Compared(name, planned, done, plan.embed, planned_in, ran)


def _million(database: str, config: Path, records: int) -> Row:
    """The plan of a first load of ``records`` records written by SQL (one or two chunks each): its time, and the
    bench process's peak RSS after it."""
    from store.connect.postgres import engine_url

    engine = sa.create_engine(engine_url(database))
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE IF EXISTS bench_million"))
        conn.execute(
            sa.text(
                "CREATE TABLE bench_million AS SELECT i AS id, 'Note ' || i AS title, 'call' AS kind, "
                "now() AS updated_at, repeat('renewal ' || (i % 997) || ' pricing ' || md5(i::text) || ' ', "
                "1 + i % 4) AS body FROM generate_series(1, :n) AS i"
            ),
            {"n": records},
        )
        conn.execute(sa.text("ALTER TABLE bench_million ADD PRIMARY KEY (id)"))
    engine.dispose()
    config.write_text(
        config.read_text() + sql_collection(database=database, table="bench_million", collection="million")
    )
    began = time.perf_counter()
    plan = _plan(load_settings(config), "million")
    seconds = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    detail = (
        f"{plan.new:,} new records, {plan.chunks:,} chunks, {plan.embed:,} texts to embed, {plan.tokens:,} tokens "
        f"({plan.counted_by}), {plan.calls:,} calls; bench process peak RSS {peak:.0f} MiB"
    )
    return Row(SECTION, f"plan of a first load, {records:,} records", round(seconds, 1), "s", None, "", True, detail)


def run(quick: bool = False) -> list[Row]:
    """The five runs on 20,000 records (2,000 when ``quick``)."""
    records = 2_000 if quick else 20_000
    rng = random.Random(11)
    with (
        tempfile.TemporaryDirectory(prefix="vsbench") as folder,
        redis_server() as (redis_url, _),
        embedded_postgres(Path(folder) / "pg") as database,
        FakeOpenAI(dimensions=16) as openai,
    ):
        crm = CrmTable(database, "bench_bill")
        crm.insert(
            [
                {"id": i, "title": f"Note {i}", "kind": "call", "body": _body(rng, rng.random() < 0.02)}
                for i in range(1, records + 1)
            ]
        )
        cache_url = redis_url.rsplit("/", 1)[0] + "/1"
        flush = redis.Redis.from_url(cache_url).flushdb
        config = Path(folder) / "vectorsync.toml"

        def configure(max_tokens: int) -> Settings:
            config.write_text(
                settings_toml(
                    broker=redis_url,
                    cache=cache_url,
                    database=database,
                    openai_url=openai.url,
                    table=crm.name,
                    collection="notes",
                    dimensions=16,
                    batch_size=WORKER_BATCH,
                    max_tokens=max_tokens,
                    extra=SAME_MODEL.format(url=openai.url),
                ).replace('"text-embedding-test"', '"text-embedding-3-small"')
            )
            return load_settings(config)

        settings = configure(64)
        compared: list[tuple[Compared, dict[str, bool]]] = []
        reindex: Callable[[Producer], str] = lambda producer: producer.reindex_all("notes")  # noqa: E731
        with celery_worker(config, concurrency=2, name="bench"):
            compared.append((_compare(f"first load, {records:,} records", settings, openai, reindex), {}))
            for i in rng.sample(range(1, records + 1), records // 100):
                crm.update(i, body=_body(rng, False))
            compared.append((_compare("1% of bodies edited", settings, openai, reindex), {}))
            for i in rng.sample(range(1, records + 1), records // 100):
                crm.update(i, kind="email")
            flush()
            compared.append((_compare("1% of metadata edited", settings, openai, reindex), {"zero": True}))
        settings = configure(96)
        before = {text for text, _ in expected_chunks(configure(64), "notes", crm.rows()).values()}
        settings = configure(96)
        after = {text for text, _ in expected_chunks(settings, "notes", crm.rows()).values()}
        kept = len(after & before) / len(after)
        with celery_worker(config, concurrency=2, name="bench"):
            flush()
            changed = _compare("chunker max_tokens 64 -> 96", settings, openai, reindex)
            compared.append((changed, {"ideal": True}))
            flush()

            def migrate(producer: Producer) -> str:
                return producer.migrate("notes", ["fake_openai_again"])[1]

            compared.append(
                (
                    _compare("migrate to the same model", settings, openai, migrate, ["fake_openai_again"]),
                    {"zero": True},
                )
            )
        crm.close()
        rows = [_million(database, config, 100_000 if quick else 1_000_000)]
    kept_row = Row(SECTION, "chunk texts the chunker change keeps", round(kept, 3), "", None, "~0.9", kept >= 0.88, "")
    rows.append(kept_row)
    for measured, checks in compared:
        print(json.dumps(asdict(measured)))
        rows += measured.rows(**checks)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="2,000 records instead of 20,000")
    print_table(run(quick=parser.parse_args().quick))
