"""The bill bench's capped first load (``bench.bill``): a first load capped at a share of its plan's tokens pauses
with the tokens served under the cap and the store holding exactly the records the ledger holds; resumed, it ends
done having bought each text once, with the embedding cache on and off. Also the records both parts load."""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench.provider_calls import wait_done
from bench.report import Row
from bench.targets import judged
from store.broker.producer import Producer
from store.client import Client
from store.connect.postgres import engine_url
from store.plan import Plan
from store.settings import Settings, load_settings
from store.state.ledger import RunStatus
from tests.crm import CrmTable, expected_chunks, stored_chunks
from tests.fake_openai import FakeOpenAI
from tests.settings_files import sql_collection
from tests.workers import celery_worker
from worker.repair.plan_reading import PlanReading

__all__ = ["CAP_SHARE", "SECTION", "body", "capped_load", "chunks_off", "notes", "plan_of", "rows_of"]

SECTION = "bill"
#: The capped load's cap, a share of its plan's tokens.
CAP_SHARE = 0.4
WORDS = ["onboarding", "rollout", "invoice", "renewal", "pricing", "discount", "contract", "meeting", "call"]


def body(rng: random.Random, long: bool) -> str:
    words = rng.randint(70, 110) if long else rng.randint(8, 18)
    return " ".join(rng.choice(WORDS) + str(rng.randint(0, 999)) for _ in range(words))


def notes(rng: random.Random, records: int) -> list[dict[str, Any]]:
    """The source's rows: most one chunk long, 2% several."""
    return [
        {"id": i, "title": f"Note {i}", "kind": "call", "body": body(rng, rng.random() < 0.02)}
        for i in range(1, records + 1)
    ]


def plan_of(settings: Settings, collection: str, chain: list[str] | None = None) -> Plan:
    with Client(settings) as client, PlanReading(client) as reading:
        return client.plan(collection, reader=reading, chain=chain)


def _parked(database: str, run_id: str) -> int:
    engine = sa.create_engine(engine_url(database))
    try:
        with engine.connect() as conn:
            query = sa.text("SELECT count(*) FROM vectorsync_parked_batches WHERE run_id = :run")
            return int(conn.execute(query, {"run": run_id}).scalar_one())
    finally:
        engine.dispose()


def _settled(producer: Producer, database: str, run_id: str, *, timeout: float = 900) -> Any:
    """The run once it paused and every batch of it was counted or parked."""
    start = time.perf_counter()
    while True:
        progress = producer.reindex_status(run_id)
        if progress.status.ended:
            raise RuntimeError(f"run {run_id} ended {progress.status} before its cap: {progress}")
        paused = progress.status == RunStatus.PAUSED and progress.batches
        if paused and progress.counted + _parked(database, run_id) == progress.batches:
            return progress
        if time.perf_counter() - start > timeout:
            raise RuntimeError(f"run {run_id} still {progress.status} after {timeout} s: {progress}")
        time.sleep(0.2)


def chunks_off(expected: dict[str, Any], stored: dict[str, Any], rows: int) -> tuple[int, int]:
    """Chunks lost (expected, and missing or not as expected) and duplicated (rows beyond the expected chunks)."""
    lost = sum(1 for key, chunk in expected.items() if stored.get(key) != chunk)
    return lost, rows - (len(expected) - lost)


def rows_of(database: str, table: str) -> int:
    engine = sa.create_engine(engine_url(database))
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text(f'SELECT count(*) FROM "{table}"')).scalar_one())  # bench-owned name
    finally:
        engine.dispose()


def _budget(
    settings: Settings, database: str, crm: CrmTable, openai: FakeOpenAI, share: float, collection: str, label: str
) -> list[Row]:
    """A first load of ``collection`` capped at ``share`` of its plan's tokens: paused with served <= cap and store
    == ledger, then resumed to done, having bought each text once; the workers must be running with
    ``collection`` in their settings. ``label`` opens each row's name."""
    plan = plan_of(settings, collection)
    cap, served = int(plan.tokens * share), openai.served_tokens
    texts_before, bought_before = openai.served_texts, Counter(openai.served)
    table = settings.vectors.table_prefix + collection
    producer = Producer(settings)
    try:
        run_id = producer.reindex_all(collection, max_tokens=cap)
        paused = _settled(producer, database, run_id)
        at_pause = openai.served_tokens - served
        texts_at_pause = openai.served_texts - texts_before
        indexed = producer.ledger.record_ids(collection)
        expected, stored = expected_chunks(settings, collection, crm.rows()), stored_chunks(database, table)
        written = {key: chunk for key, chunk in expected.items() if key.split(":")[0] in indexed}
        same = {key.split(":")[0] for key in stored} == indexed and stored == written
        producer.resume(run_id, max_tokens=plan.tokens * 10)
        done = wait_done(producer, run_id)
    finally:
        producer.close()
    after = stored_chunks(database, table)
    lost, duplicated = chunks_off(expected, after, rows_of(database, table))
    said = f"{paused.counted} of {paused.batches} batches counted, the rest parked; {len(indexed):,} records written"
    ended = f"lost {lost}, duplicated {duplicated}; run {done.status}, {done.done:,} of {done.total:,} records done"
    bought = openai.served - bought_before  # each text the server embedded for this run, and how often
    texts, distinct = openai.served_texts - texts_before, len({text for text, _ in after.values()})
    twice = sum(times - 1 for times in bought.values())
    billed = texts / len(after) if after else 0.0
    return [
        Row(
            SECTION,
            f"{label}: tokens served at pause vs cap",
            at_pause,
            "tokens",
            at_pause / cap,
            "<= cap",
            at_pause <= cap,
            f"cap {cap:,} = {share:.0%} of the plan's {plan.tokens:,}; {said}",
        ),
        Row(
            SECTION,
            f"{label}: texts bought, pause + resume",
            texts,
            "texts",
            billed,
            detail=(
                f"{texts:,} texts embedded ({texts_at_pause:,} before the pause) for {len(after):,} chunks stored "
                f"({distinct:,} distinct texts); {twice:,} bought more than once"
            ),
            **judged("pause and resume against one load", billed),
        ),
        Row(
            SECTION,
            f"{label}: store == ledger at pause",
            int(same),
            "equal",
            None,
            "1",
            same,
            f"{len(stored):,} chunks stored of the {len(indexed):,} records the ledger holds",
        ),
        Row(
            SECTION,
            f"{label}: lost / duplicated after resume",
            lost + duplicated,
            "chunks",
            None,
            "0/0",
            lost == 0 and duplicated == 0,
            ended,
        ),
    ]


def capped_load(
    config: Path, database: str, openai: FakeOpenAI, records: int, share: float = CAP_SHARE, *, cached: bool = True
) -> list[Row]:
    """``_budget`` on a collection ``capped`` of its own, over a table of ``records`` records like ``notes``'; not
    ``cached``: ``capped_uncached``, the same records, its workers' embedding cache off (``cache_ttl_days = 0``; the
    run's total is still shared in the cache's Redis), in settings of their own."""
    rng = random.Random(12)
    collection = "capped" if cached else "capped_uncached"
    crm = CrmTable(database, f"bench_{collection}")
    if not cached:
        settings = config.read_text().replace("[embeddings]\n", "[embeddings]\ncache_ttl_days = 0\n", 1)
        config = config.with_name("uncached.toml")
        config.write_text(settings)
    try:
        crm.insert(notes(rng, records))
        collection_toml = sql_collection(database=database, table=crm.name, collection=collection)
        config.write_text(config.read_text() + collection_toml)
        with celery_worker(config, concurrency=2, name=f"bench-{collection}"):
            label = "budget" if cached else "budget, cache off"
            return _budget(load_settings(config), database, crm, openai, share, collection, label)
    finally:
        crm.close()
