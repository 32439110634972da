"""A collection whose model has a batch lane, on real parts: a CRM table in PostgreSQL, the fake OpenAI server
speaking the Batch API (its state on disk, so it can be restarted), and settings whose lane answers fast
(``poll_seconds`` 0.5, ``min_inputs`` 1), priced at half the synchronous price."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa

from store.calls.spend import total
from store.connect.postgres import engine_url
from store.settings import Settings, load_settings
from store.state.ledger import RunProgress
from store.state.ledger.postgres import PostgresLedger
from tests.backends import unique_name
from tests.crm import CrmTable, expected_chunks, note, stored_chunks
from tests.fake_openai import FakeOpenAI, cl100k_tokens
from tests.settings_files import settings_toml
from tests.workers import run_cli, wait_for

__all__ = ["BATCH_PRICE", "RECORDS", "Lane", "assert_bought_once_at_the_lane_s_price", "lane", "started"]

RECORDS = 120
#: The lane's price, half the synchronous one, as OpenAI's.
PRICE, BATCH_PRICE = 0.02, 0.01
LANE = f"""
[models.fake_openai.batch]
price_per_million_tokens = {BATCH_PRICE}
min_inputs = 1
poll_seconds = 0.5
"""


@dataclass
class Lane:
    config: Path
    settings: Settings
    collection: str
    crm: CrmTable
    openai: FakeOpenAI
    database: str

    def run(self, run_id: str) -> RunProgress:
        ledger = PostgresLedger(self.database)
        try:
            return ledger.run(run_id)
        finally:
            ledger.close()

    def ended(self, run_id: str, timeout: float = 120) -> RunProgress:
        return wait_for(lambda: (r := self.run(run_id)).status.ended and r, timeout=timeout, what="the run to end")

    def stored(self) -> dict[str, tuple[str, dict[str, object]]]:
        return stored_chunks(self.database, self.settings.vectors.table_prefix + self.collection)

    def expected(self) -> dict[str, tuple[str, dict[str, object]]]:
        return expected_chunks(self.settings, self.collection, self.crm.rows())

    def texts_held(self, run_id: str) -> int:
        """The run's texts the lane still holds in the state database."""
        engine = sa.create_engine(engine_url(self.database), poolclass=sa.NullPool)
        try:
            with engine.connect() as conn:
                query = sa.text("SELECT count(*) FROM vectorsync_lane_texts WHERE run_id = :run")
                return int(conn.execute(query, {"run": run_id}).scalar_one())
        finally:
            engine.dispose()

    def tally(self, run_id: str) -> dict[str, int]:
        """What the run counted as going another way than the lane (``store.batches.state.OUTCOMES``)."""
        engine = sa.create_engine(engine_url(self.database), poolclass=sa.NullPool)
        try:
            with engine.connect() as conn:
                query = sa.text("SELECT outcome, count FROM vectorsync_lane_tally WHERE run_id = :run")
                return {outcome: int(count) for outcome, count in conn.execute(query, {"run": run_id})}
        finally:
            engine.dispose()

    def needed_tokens(self) -> int:
        return sum(cl100k_tokens(text) for text in {text for text, _ in self.expected().values()})


@pytest.fixture
def lane(tmp_path: Path, broker_redis_url: str, scratch_redis_url: str, postgres_url: str) -> Iterator[Lane]:
    redis.Redis.from_url(broker_redis_url).flushdb()
    redis.Redis.from_url(scratch_redis_url).flushdb()
    collection = unique_name("laned")
    with FakeOpenAI(dimensions=8, state_dir=tmp_path / "openai") as openai:
        crm = CrmTable(postgres_url, f"crm_{collection}")
        crm.insert([note(i) for i in range(1, RECORDS + 1)])
        text = settings_toml(
            broker=broker_redis_url,
            cache=scratch_redis_url,
            database=postgres_url,
            openai_url=openai.url,
            table=crm.name,
            collection=collection,
            model="text-embedding-3-small",
        )
        # 16 texts a request: a job of several lines, of which an expired one answers some
        model = f"[models.fake_openai]\nprice_per_million_tokens = {PRICE}\nmax_inputs = 16"
        text = text.replace("[models.fake_openai]", model)
        config = tmp_path / "vectorsync.toml"
        # the sweeps Celery beat would start on it go through the lane too
        config.write_text(text + LANE + f'\n[collections.{collection}]\nlane = "batch"\n')
        try:
            yield Lane(config, load_settings(config), collection, crm, openai, postgres_url)
        finally:
            crm.close()


def started(lane: Lane) -> str:
    begun = run_cli(lane.config, "reindex", lane.collection, "--batch")
    assert begun.returncode == 0, begun.stdout + begun.stderr
    return begun.stdout.split()[1]


def assert_bought_once_at_the_lane_s_price(lane: Lane, run_id: str) -> None:
    """Every distinct text bought once, through a job, and the run's spend what the jobs' usage said, priced."""
    assert lane.openai.served_calls == 0  # nothing bought synchronously
    bought = [text for job in lane.openai.batch_inputs() for text in job]
    assert len(bought) == len(set(bought)) == len({text for text, _ in lane.expected().values()})
    assert lane.openai.batch_served_tokens == lane.needed_tokens()
    ledger = PostgresLedger(lane.database)
    try:
        spent = total(ledger.run_spend(run_id))
    finally:
        ledger.close()
    assert spent.tokens == lane.needed_tokens()
    assert spent.cost == pytest.approx(spent.tokens * BATCH_PRICE / 1e6)
