"""Pushed documents end to end: indexed and deleted through a worker, and the edit and delete of a host whose
clock is behind taking effect all the same."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from store.connect.postgres import engine_url
from tests.crm import stored_chunks
from tests.integration.worker.end_to_end.world import World
from tests.workers import celery_worker, run_cli, wait_for

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("broker", ["redis"], indirect=True)  # the push source
def test_pushed_documents_are_indexed_and_deleted_through_the_worker(world: World, postgres_url: str) -> None:
    pushed = f"{world.collection}_pushed"
    producer = world.producer()
    table = world.settings.vectors.table_prefix + pushed
    with celery_worker(world.config, concurrency=1):
        producer.index_document(
            pushed, "doc-1", "Pricing > Discounts\n\nVolume discounts start at 50 seats.", {"kind": "handbook"}
        )
        stored = wait_for(lambda: stored_chunks(postgres_url, table), timeout=60, what="the pushed document")
        assert stored == {
            "doc-1:0": (
                "Pricing > Discounts\n\nVolume discounts start at 50 seats.",
                {"kind": "handbook", "record_id": "doc-1", "chunk": 0},
            )
        }
        producer.delete_document(pushed, "doc-1")
        wait_for(lambda: stored_chunks(postgres_url, table) == {}, timeout=60, what="the pushed document to go")
        # Reindexing a pushed collection (now empty) is refused before anything is sent, its vector index kept.
        refused = run_cli(world.config, "reindex", pushed, "--wait", "--timeout", "60")
        assert refused.returncode == 2 and "has its records pushed" in refused.stderr, refused.stdout + refused.stderr
        engine = sa.create_engine(engine_url(postgres_url))
        indexes = {i["name"] for i in sa.inspect(engine).get_indexes(table)}
        engine.dispose()
        assert f"{table}_embedding_idx" in indexes
    producer.close()


@pytest.mark.parametrize("broker", ["redis"], indirect=True)  # the clock is the cache's Redis, whatever the broker
def test_an_edit_and_a_delete_from_a_host_whose_clock_is_10s_behind_both_take_effect(
    world: World, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Versions were each sender's time.time_ns(): the slower host's edit and delete counted as older than the
    first send and were dropped as superseded, the old text searchable after both (store.broker.versions)."""
    pushed, table = f"{world.collection}_pushed", world.settings.vectors.table_prefix + f"{world.collection}_pushed"
    ahead, behind = world.producer(), world.producer()
    real = time.time_ns
    with celery_worker(world.config, concurrency=1):
        ahead.index_document(pushed, "doc-1", "The office opens at nine.")
        wait_for(
            lambda: stored_chunks(postgres_url, table).get("doc-1:0", ("",))[0] == "The office opens at nine.",
            timeout=60,
            what="the first send",
        )
        monkeypatch.setattr(time, "time_ns", lambda: real() - 10 * 10**9)
        behind.index_document(pushed, "doc-1", "The office opens at ten.")
        wait_for(
            lambda: stored_chunks(postgres_url, table).get("doc-1:0", ("",))[0] == "The office opens at ten.",
            timeout=60,
            what="the edit sent from the host 10 s behind",
        )
        behind.delete_document(pushed, "doc-1")
        wait_for(lambda: stored_chunks(postgres_url, table) == {}, timeout=60, what="the delete from that host")
    ahead.close()
    behind.close()
