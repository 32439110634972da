"""A run's budget with a real worker, PostgreSQL and the fake OpenAI server: a first load capped in tokens pauses
before a call would pass the cap, its store holding exactly the records its ledger holds, each whole; resumed
with a higher cap, it ends done with every record indexed once.

With one worker process and with two: the run's total is shared by every process in the cache's Redis
(``store.broker.reservations``), so batches working at once in two processes cannot pass the cap together.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa

from store.broker.reservations import Reservations
from store.calls.spend import total
from store.connect.postgres import engine_url
from store.settings import Settings, load_settings
from store.state.ledger import RunProgress, RunStatus
from store.state.ledger.postgres import PostgresLedger
from tests.backends import unique_name
from tests.crm import CrmTable, expected_chunks, note, stored_chunks
from tests.fake_openai import FakeOpenAI, cl100k_tokens
from tests.settings_files import settings_toml
from tests.workers import celery_worker, run_cli, wait_for

pytestmark = pytest.mark.slow

RECORDS = 300


@dataclass
class Capped:
    config: Path
    settings: Settings
    collection: str
    crm: CrmTable
    openai: FakeOpenAI
    database: str

    def ledger(self) -> PostgresLedger:
        return PostgresLedger(self.database)

    def stored(self) -> dict[str, tuple[str, dict[str, object]]]:
        return stored_chunks(self.database, self.settings.vectors.table_prefix + self.collection)

    def expected(self) -> dict[str, tuple[str, dict[str, object]]]:
        return expected_chunks(self.settings, self.collection, self.crm.rows())


@pytest.fixture
def capped(tmp_path: Path, broker_redis_url: str, scratch_redis_url: str, postgres_url: str) -> Iterator[Capped]:
    redis.Redis.from_url(broker_redis_url).flushdb()
    redis.Redis.from_url(scratch_redis_url).flushdb()
    collection = unique_name("capped")
    with FakeOpenAI(dimensions=8) as openai:
        crm = CrmTable(postgres_url, f"crm_{collection}")
        crm.insert([note(i) for i in range(1, RECORDS + 1)])
        text = settings_toml(
            broker=broker_redis_url,
            cache=scratch_redis_url,
            database=postgres_url,
            openai_url=openai.url,
            table=crm.name,
            collection=collection,
            model="text-embedding-3-small",  # counted before they are sent with cl100k, as the server counts them
        )
        config = tmp_path / "vectorsync.toml"
        config.write_text(text)
        try:
            yield Capped(config, load_settings(config), collection, crm, openai, postgres_url)
        finally:
            crm.close()


def _parked(database: str, run_id: str) -> int:
    engine = sa.create_engine(engine_url(database))
    try:
        with engine.connect() as conn:
            query = sa.text("SELECT count(*) FROM vectorsync_parked_batches WHERE run_id = :run")
            return int(conn.execute(query, {"run": run_id}).scalar_one())
    finally:
        engine.dispose()


def _run(world: Capped, run_id: str) -> RunProgress:
    ledger = world.ledger()
    try:
        return ledger.run(run_id)
    finally:
        ledger.close()


def _assert_store_is_the_ledger(world: Capped) -> set[str]:
    """Every record the ledger holds is stored whole, as its source says, and nothing else is stored."""
    ledger = world.ledger()
    try:
        indexed = ledger.record_ids(world.collection)
    finally:
        ledger.close()
    expected, stored = world.expected(), world.stored()
    assert {key.split(":")[0] for key in stored} == indexed
    assert stored == {key: chunk for key, chunk in expected.items() if key.split(":")[0] in indexed}
    return indexed


@pytest.mark.parametrize("concurrency", [2])  # two processes: the cap holds only through the shared total
def test_a_capped_first_load_pauses_at_its_cap_and_resumes_to_done_with_every_record_once(
    capped: Capped, concurrency: int
) -> None:
    texts = {text for text, _ in capped.expected().values()}
    needed = sum(cl100k_tokens(text) for text in texts)
    cap = needed // 3
    assert run_cli(capped.config, "init").returncode == 0
    with celery_worker(capped.config, concurrency=concurrency):
        started = run_cli(capped.config, "reindex", capped.collection, "--max-tokens", str(cap), "--wait")
        assert started.returncode == 1, started.stdout + started.stderr  # --wait stops at the pause: not done
        run_id = started.stdout.split()[1]
        assert f"paused: {RECORDS} records" in started.stdout and "paused at its budget" in started.stdout

        def settled() -> RunProgress | None:
            run = _run(capped, run_id)
            parked = _parked(capped.database, run_id)
            return (
                run if run.status == RunStatus.PAUSED and run.batches and run.counted + parked == run.batches else None
            )

        paused = wait_for(settled, timeout=180, what="the run to pause and park its batches")
        assert 0 < capped.openai.served_tokens <= cap
        assert paused.max_tokens == cap and not paused.status.ended
        assert paused.error.startswith(f"paused at its budget: max_tokens = {cap}, spent ")
        assert f"`vectorsync runs resume {run_id} --max-tokens N`" in paused.error
        ledger = capped.ledger()
        try:
            assert total(ledger.run_spend(run_id)).tokens == capped.openai.served_tokens
        finally:
            ledger.close()
        shared = Reservations.from_url(capped.settings.cache_url)
        assert shared is not None
        try:  # every call settled to what the server counted: the shared total is what was served
            assert (used := shared.used(run_id)) is not None and used.tokens == capped.openai.served_tokens
        finally:
            shared.close()
        written = _assert_store_is_the_ledger(capped)
        assert 0 < len(written) < RECORDS

        view = json.loads(run_cli(capped.config, "status", "--json").stdout)
        [shown] = [r for r in view["runs"] if r["run_id"] == run_id]
        assert shown["status"] == "paused" and shown["max_tokens"] == cap
        assert shown["spend"]["tokens"] == capped.openai.served_tokens
        screen = run_cli(capped.config, "status").stdout
        assert "paused at its budget" in " ".join(screen.split())

        resumed = run_cli(capped.config, "runs", "resume", run_id[:10], "--max-tokens", str(needed * 2))
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert f"run {run_id} resumed:" in resumed.stdout
        done = wait_for(
            lambda: (r := _run(capped, run_id)).status.ended and r, timeout=180, what="the resumed run to end"
        )
    assert done.status == RunStatus.DONE, done.error
    assert (done.done, done.skipped, done.failed, done.total) == (RECORDS, 0, 0, RECORDS)
    assert _assert_store_is_the_ledger(capped) == {str(i) for i in range(1, RECORDS + 1)}
    assert capped.stored() == capped.expected()
    assert _parked(capped.database, run_id) == 0
    # Pause and resume bill one load: every distinct text was bought once (a call's vectors are cached as it
    # answers, so a batch parked between two of its calls keeps what the first bought).
    assert capped.openai.served_tokens == needed


def test_pause_and_resume_of_a_capped_load_buy_each_text_once_with_the_cache_off(capped: Capped) -> None:
    """Issue 50: a capped first load, paused and resumed, billed 5.5% over one load: a batch whose calls were
    reserved one at a time bought its first calls, was parked when a later one would pass the cap, and its
    resumed run bought them again. With the cache off nothing keeps those vectors, so only a batch that buys all
    its calls or none bills one load: at the pause every text bought is stored, and after the resume each text of
    the load was bought exactly once. Eight texts a call, so each batch makes several and the cap falls inside
    one; two processes, so batches meet the cap together."""
    text = capped.config.read_text()
    assert "batch_size = 64\n" in text  # [embeddings]'s, the only one of that size
    capped.config.write_text(text.replace("batch_size = 64\n", "batch_size = 8\ncache_ttl_days = 0\n", 1))
    settings = load_settings(capped.config)
    assert settings.embeddings.cache_ttl_days == 0 and settings.embeddings.batch_size == 8
    texts = {text for text, _ in capped.expected().values()}
    needed = sum(cl100k_tokens(text) for text in texts)
    cap = needed * 2 // 5  # 40%, as the report's load
    assert run_cli(capped.config, "init").returncode == 0
    with celery_worker(capped.config, concurrency=2):
        started = run_cli(capped.config, "reindex", capped.collection, "--max-tokens", str(cap))
        assert started.returncode == 0, started.stdout + started.stderr
        run_id = started.stdout.split()[1]

        def settled() -> RunProgress | None:
            run = _run(capped, run_id)
            parked = _parked(capped.database, run_id)
            return (
                run if run.status == RunStatus.PAUSED and run.batches and run.counted + parked == run.batches else None
            )

        wait_for(settled, timeout=180, what="the run to pause and park its batches")
        assert 0 < capped.openai.served_tokens <= cap
        # What the pause bought, it kept: every text bought is stored, in a record the ledger holds whole.
        written = _assert_store_is_the_ledger(capped)
        assert 0 < len(written) < RECORDS
        stored = {text for text, _ in capped.stored().values()}
        assert set(capped.openai.served) == stored and capped.openai.served_texts == len(stored)

        resumed = run_cli(capped.config, "runs", "resume", run_id, "--max-tokens", str(needed * 2))
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        done = wait_for(
            lambda: (r := _run(capped, run_id)).status.ended and r, timeout=180, what="the resumed run to end"
        )
    assert done.status == RunStatus.DONE, done.error
    assert (done.done, done.skipped, done.failed, done.total) == (RECORDS, 0, 0, RECORDS)
    assert capped.stored() == capped.expected()
    # Pause and resume billed one load: each text once, none twice.
    bought_twice = {text: times for text, times in capped.openai.served.items() if times > 1}
    assert not bought_twice, f"{sum(bought_twice.values()) - len(bought_twice)} texts bought again"
    assert set(capped.openai.served) == texts and capped.openai.served_texts == len(texts)
    assert capped.openai.served_tokens == needed
