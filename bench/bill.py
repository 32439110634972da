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

Then a budget, on a collection and table of its own (``capped``, records made as ``notes``'): a first load capped at
40% of the tokens its plan says it needs pauses, with the tokens served <= the cap and the store holding
exactly the records the ledger holds, each whole; resumed with a cap far above the plan, it ends done with no
chunk lost or duplicated, and pause and resume together bill one load: the texts the server embedded across
both, against the chunks stored, at most 1.01x (issue 50). The same load again with the embedding cache off
(``capped_uncached``, ``cache_ttl_days = 0``), where no cache can keep what a parked batch bought.

    .venv/bin/python -m bench.bill --budget [--quick] [--cap 0.4]

runs the budget alone (on the records ``--quick`` or not says), with the cap a share of the plan.
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

import redis
import sqlalchemy as sa

from bench.bill_budget import CAP_SHARE, SECTION, body, capped_load, notes, plan_of
from bench.provider_calls import wait_done
from bench.report import Row, print_table
from bench.targets import judged
from store.broker.producer import Producer
from store.connect.postgres import engine_url
from store.settings import Settings, load_settings
from tests.crm import CrmTable, expected_chunks
from tests.fake_openai import FakeOpenAI
from tests.services import embedded_postgres, redis_server
from tests.settings_files import settings_toml, sql_collection
from tests.workers import celery_worker

__all__ = ["run"]

EMBED_BATCH, WORKER_BATCH = 64, 100
#: The capped load's cap, a share of the tokens its plan says it needs (issue 50's report capped at 40%).
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
        rows = [
            Row(
                SECTION,
                f"plan = run: {self.name}",
                int(same),
                "equal",
                detail=detail,
                **judged("plan against its run", same),
            )
        ]
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
                    detail=f"ideal ceil({self.chunks_to_buy} chunk texts not stored / {EMBED_BATCH}) = {best}",
                    **judged("provider calls against the ideal", ratio),
                )
            )
        return rows


def _compare(
    name: str, settings: Settings, openai: FakeOpenAI, start: Callable[[Producer], str], chain: list[str] | None = None
) -> Compared:
    began = time.perf_counter()
    plan = plan_of(settings, "notes", chain)
    planned_in = time.perf_counter() - began
    calls, tokens = openai.served_calls, openai.served_tokens
    producer = Producer(settings)
    try:
        began = time.perf_counter()
        progress = wait_done(producer, start(producer))
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
    plan = plan_of(load_settings(config), "million")
    seconds = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    detail = (
        f"{plan.new:,} new records, {plan.chunks:,} chunks, {plan.embed:,} texts to embed, {plan.tokens:,} tokens "
        f"({plan.counted_by}), {plan.calls:,} calls; bench process peak RSS {peak:.0f} MiB"
    )
    return Row(SECTION, f"plan of a first load, {records:,} records", round(seconds, 1), "s", None, "", True, detail)


def run(quick: bool = False, *, budget_only: bool = False, share: float = CAP_SHARE) -> list[Row]:
    """The five runs on 20,000 records (2,000 when ``quick``), then the capped first load (``budget_only``: that
    alone, on the same records), capped at ``share`` of its plan."""
    records = 2_000 if quick else 20_000
    rng = random.Random(11)
    with (
        tempfile.TemporaryDirectory(prefix="vsbench") as folder,
        redis_server() as (redis_url, _),
        embedded_postgres(Path(folder) / "pg") as database,
        FakeOpenAI(dimensions=16) as openai,
    ):
        crm = CrmTable(database, "bench_bill")
        crm.insert(notes(rng, records))
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
                    model="text-embedding-3-small",
                )
            )
            return load_settings(config)

        settings = configure(64)
        if budget_only:
            crm.close()
            return [
                *capped_load(config, database, openai, records, share),
                *capped_load(config, database, openai, records, share, cached=False),
            ]
        compared: list[tuple[Compared, dict[str, bool]]] = []
        reindex: Callable[[Producer], str] = lambda producer: producer.reindex_all("notes")  # noqa: E731
        with celery_worker(config, concurrency=2, name="bench"):
            compared.append((_compare(f"first load, {records:,} records", settings, openai, reindex), {}))
            for i in rng.sample(range(1, records + 1), records // 100):
                crm.update(i, body=body(rng, False))
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
        budget = capped_load(config, database, openai, records, share)
        budget += capped_load(config, database, openai, records, share, cached=False)
        rows = [_million(database, config, 100_000 if quick else 1_000_000)]
    kept_row = Row(SECTION, "chunk texts the chunker change keeps", round(kept, 3), "", None, "~0.9", kept >= 0.88, "")
    rows.append(kept_row)
    for measured, checks in compared:
        print(json.dumps(asdict(measured)))
        rows += measured.rows(**checks)
    return rows + budget


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="2,000 records instead of 20,000")
    parser.add_argument("--budget", action="store_true", help="the capped first load alone")
    parser.add_argument("--cap", type=float, default=CAP_SHARE, help="the cap, a share of the plan's tokens")
    args = parser.parse_args()
    measured = run(quick=args.quick, budget_only=args.budget, share=args.cap)
    print_table(measured)
    for row in measured:
        if row.detail:
            print(f"{row.name}: {row.detail}")
