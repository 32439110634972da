"""Benchmark provider calls per reindex against the fewest possible: real Redis, PostgreSQL+pgvector and two
celery worker processes, embedding through the tests' local OpenAI-protocol server, which counts requests.

    .venv/bin/python -m bench.provider_calls [--quick]

Four reindexes of one SQL source with ``updated_at``: a first load (every record new), a reindex of the
unchanged source, a reindex after 1% of the records were edited (new bodies, so every chunk of an edited
record is new), and one after another 1% was edited by a plain ``UPDATE`` that leaves ``updated_at`` alone
(every 100th record: each id page's probe record, so each page goes whole). The ideal is ceil(new distinct
chunk texts / ``embeddings.batch_size``): each provider call as full as the batch size allows; for the
unchanged source it is 0. Calls are counted where they arrive (the fake server), so retries and cache hits
show as they would at a paying provider.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import sqlalchemy as sa

from bench.report import Row, print_table
from bench.targets import judged
from store.broker.producer import Producer
from store.connect.postgres import engine_url
from store.settings import Settings, load_settings
from store.state.ledger import RunProgress, RunStatus
from tests.crm import CrmTable, expected_chunks
from tests.fake_openai import FakeOpenAI
from tests.services import embedded_postgres, redis_server
from tests.settings_files import settings_toml
from tests.workers import celery_worker

__all__ = ["run"]

SECTION = "provider calls"
#: Texts per provider call (``embeddings.batch_size``) and ids per index_batch task (``worker.batch_size``).
EMBED_BATCH, WORKER_BATCH = 64, 100
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
    "integration",
    "migration",
    "security",
    "review",
    "budget",
    "approval",
]


@dataclass(frozen=True)
class Measured:
    """One reindex: the provider calls it made, the fewest it could have made, its batches and duration."""

    name: str
    calls: int
    ideal: int
    chunks: int
    batches: int
    seconds: float

    def row(self) -> Row:
        if self.ideal == 0:
            return Row(SECTION, self.name, self.calls, "calls", None, "0 calls", self.calls == 0, self._detail())
        ratio = self.calls / self.ideal
        judge = judged("provider calls against the ideal", ratio)
        return Row(SECTION, self.name, self.calls, "calls", ratio, detail=self._detail(), **judge)

    def _detail(self) -> str:
        return (
            f"ideal {self.ideal} (ceil({self.chunks} new chunks / {EMBED_BATCH})); {self.batches} index_batch "
            f"tasks; {self.seconds:.1f} s"
        )


def _body(rng: random.Random) -> str:
    """About three 64-token chunks on average."""
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(30, 120)))


def _texts(settings: Settings, collection: str, crm: CrmTable) -> set[str]:
    return {text for text, _ in expected_chunks(settings, collection, crm.rows()).values()}


def _edit_leaving_updated_at(crm: CrmTable, bodies: dict[int, str]) -> None:
    """New bodies by a plain UPDATE, as a script or another service would write them: updated_at stays."""
    with crm.engine.begin() as conn:
        conn.execute(
            sa.update(crm.table).where(crm.table.c.id == sa.bindparam("key")).values(body=sa.bindparam("body")),
            [{"key": i, "body": b} for i, b in bodies.items()],
        )


def _batches(database: str, run_id: str) -> int:
    engine = sa.create_engine(engine_url(database))
    try:
        with engine.connect() as conn:
            found = conn.execute(sa.text("SELECT batches FROM vectorsync_runs WHERE run_id = :r"), {"r": run_id})
            return int(found.scalar_one() or 0)
    finally:
        engine.dispose()


def wait_done(producer: Producer, run_id: str, *, timeout: float = 900) -> RunProgress:
    """Wait for run ``run_id`` to end; its progress. Raises when it ends other than done with no failure, or
    outlasts ``timeout``."""
    start = time.perf_counter()
    while not (progress := producer.reindex_status(run_id)).status.ended:
        if time.perf_counter() - start > timeout:
            raise RuntimeError(f"run {run_id} still {progress.status} after {timeout} s")
        time.sleep(0.1)
    if progress.status != RunStatus.DONE or progress.failed:
        raise RuntimeError(f"run {run_id} ended {progress.status}: {progress}")
    return progress


def _reindex(producer: Producer, collection: str, *, timeout: float = 900) -> tuple[str, float]:
    """Run a reindex to its end; its run id and duration. Raises when it fails or outlasts ``timeout``."""
    start = time.perf_counter()
    run_id = producer.reindex_all(collection)
    wait_done(producer, run_id, timeout=timeout)
    return run_id, time.perf_counter() - start


def _measure(
    name: str, new_texts: Iterable[str], openai: FakeOpenAI, producer: Producer, collection: str, database: str
) -> Measured:
    chunks = len(set(new_texts))
    before = openai.calls
    run_id, seconds = _reindex(producer, collection)
    return Measured(
        name, openai.calls - before, math.ceil(chunks / EMBED_BATCH), chunks, _batches(database, run_id), seconds
    )


def run(quick: bool = False) -> list[Row]:
    """First load, unchanged reindex and 1% edit of 20,000 records (2,000 when ``quick``)."""
    records = 2_000 if quick else 20_000
    rng = random.Random(7)
    with (
        tempfile.TemporaryDirectory(prefix="vsbench") as folder,
        redis_server() as (redis_url, _),
        embedded_postgres(Path(folder) / "pg") as database,
        FakeOpenAI(dimensions=16) as openai,
    ):
        crm = CrmTable(database, "bench_calls")
        crm.insert(
            [
                {"id": i, "title": f"Note {i}", "kind": rng.choice(["call", "email"]), "body": _body(rng)}
                for i in range(1, records + 1)
            ]
        )
        config = Path(folder) / "vectorsync.toml"
        config.write_text(
            settings_toml(
                broker=redis_url,
                cache=redis_url,
                database=database,
                openai_url=openai.url,
                table=crm.name,
                collection="notes",
                dimensions=16,
                batch_size=WORKER_BATCH,
            )
        )
        settings = load_settings(config)
        assert settings.embeddings.batch_size == EMBED_BATCH, "the ideal assumes this batch size"
        producer = Producer(settings)
        try:
            with celery_worker(config, concurrency=2, name="bench"):
                loaded = _texts(settings, "notes", crm)
                measured = [
                    _measure(f"first load, {records:,} records", loaded, openai, producer, "notes", database),
                    _measure("reindex, nothing changed", (), openai, producer, "notes", database),
                ]
                edited = rng.sample(range(1, records + 1), records // 100)
                for i in edited:
                    crm.update(i, body=_body(rng))
                fresh = _texts(settings, "notes", crm) - loaded
                measured.append(
                    _measure(
                        f"reindex after editing 1% ({len(edited)} records)", fresh, openai, producer, "notes", database
                    )
                )
                loaded |= fresh
                untouched = list(range(1, records + 1, 100))
                _edit_leaving_updated_at(crm, {i: _body(rng) for i in untouched})
                fresh = _texts(settings, "notes", crm) - loaded
                measured.append(
                    _measure(
                        f"reindex after editing 1% ({len(untouched)} records), updated_at left alone",
                        fresh,
                        openai,
                        producer,
                        "notes",
                        database,
                    )
                )
        finally:
            producer.close()
            crm.close()
    for m in measured:
        print(json.dumps(asdict(m)))
    return [m.row() for m in measured]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="2,000 records instead of 20,000")
    print_table(run(quick=parser.parse_args().quick))
