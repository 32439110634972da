"""Reconcile sweeps over a SQL source with ``source.updated_at``: only known rows whose stamp moved are read
and hashed (new ones are stale unread), deleted rows are still found, and a row without a stamp is always
checked."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
import sqlalchemy as sa

from store.embeddings import Embeddings
from store.settings import Settings, SourceSettings
from store.state.ledger import MemoryLedger
from store.vectors.backends import memory_store
from tests.backends import unique_name
from tests.crm import CrmTable
from worker.pipeline.chunker import Chunker
from worker.pipeline.core import Pipeline, Recipe
from worker.runtime.context import Jobs
from worker.sources.base import SourceRecord
from worker.sources.sql import SqlSource


class CountingSource(SqlSource):
    """A SqlSource that remembers which ids were read in full (and so hashed)."""

    def __init__(self, settings: SourceSettings) -> None:
        super().__init__(settings)
        self.read: list[str] = []

    def fetch(self, ids: Sequence[str]) -> dict[str, SourceRecord]:
        self.read.extend(ids)
        return super().fetch(ids)


@pytest.fixture
def crm(postgres_url: str) -> Iterator[CrmTable]:
    table = CrmTable(postgres_url, unique_name("crm"))
    table.insert([{"id": i, "title": f"note {i}", "body": f"body of note {i}", "kind": "call"} for i in range(1, 51)])
    yield table
    table.close()


def make_jobs(postgres_url: str, table: str, *, updated_at: str | None) -> tuple[Jobs, CountingSource]:
    settings = Settings.model_validate(
        {"vectors": {"store": "memory", "dimensions": 16}, "embeddings": {"cache_ttl_days": 0}}
    )
    source = CountingSource(
        SourceSettings(
            kind="sql",
            url=postgres_url,
            table=table,
            text="{title}\n\n{body}",
            metadata=["kind"],
            updated_at=updated_at,
        )
    )
    name = unique_name()
    pipeline = Pipeline(
        name=name,
        collection=memory_store(dimensions=16).get_collection(name, create=True),
        source=source,
        recipe=Recipe(Chunker(), Embeddings.from_settings(settings)),
        ledger=MemoryLedger(),
    )
    return Jobs.over(pipeline), source


def test_a_sweep_reads_only_rows_whose_updated_at_moved_and_finds_deleted_ones(
    crm: CrmTable, postgres_url: str
) -> None:
    jobs, source = make_jobs(postgres_url, crm.name, updated_at="updated_at")
    jobs.indexer.index([str(i) for i in range(1, 51)])
    source.read.clear()
    assert jobs.sweeper.stale(page_size=20) == []
    assert source.read == []  # nothing moved: nothing read, nothing hashed

    crm.update(7, body="changed")
    crm.update(8, title="note 8")  # touched, same content
    crm.delete([9])
    crm.insert([{"id": 51, "title": "new", "body": "new note", "kind": "email"}])
    assert jobs.sweeper.stale(page_size=20) == ["7", "51", "9"]
    assert sorted(source.read, key=int) == ["7", "8"]  # 51 is new to the ledger: stale without a read

    jobs.indexer.index(["7", "8", "9", "51"])  # 8 is skipped as unchanged, and its new stamp remembered
    source.read.clear()
    assert jobs.sweeper.stale(page_size=20) == []
    assert source.read == []


def test_without_updated_at_every_row_is_read(crm: CrmTable, postgres_url: str) -> None:
    jobs, source = make_jobs(postgres_url, crm.name, updated_at=None)
    jobs.indexer.index([str(i) for i in range(1, 51)])
    source.read.clear()
    crm.update(3, body="changed")
    assert jobs.sweeper.stale(page_size=20) == ["3"]
    assert len(source.read) == 50


def test_a_null_stamp_is_always_read(crm: CrmTable, postgres_url: str) -> None:
    with crm.engine.begin() as conn:
        conn.execute(sa.text(f'ALTER TABLE "{crm.name}" ALTER COLUMN updated_at DROP NOT NULL'))
        conn.execute(sa.update(crm.table).where(crm.table.c.id == 5).values(updated_at=None))
    jobs, source = make_jobs(postgres_url, crm.name, updated_at="updated_at")
    jobs.indexer.index([str(i) for i in range(1, 51)])
    source.read.clear()
    assert jobs.sweeper.stale(page_size=20) == []
    assert source.read == ["5"]
