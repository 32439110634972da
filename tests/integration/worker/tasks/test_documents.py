"""Pushed documents through a real worker: a push whose message the broker lost is sent again by its
collection's sweep, from the copy kept in Redis, and the copy goes once a worker has indexed it
(worker.tasks.documents, store.broker.pushes)."""

from __future__ import annotations

import time
from pathlib import Path

import redis

from store.broker.producer import Producer
from store.contract import LIVE_QUEUE, RunStatus
from store.settings import load_settings
from tests.backends import unique_name
from tests.crm import CrmTable, stored_chunks
from tests.fake_openai import FakeOpenAI
from tests.settings_files import settings_toml
from tests.workers import celery_worker, wait_for

#: Limits short enough that a push sent a visibility timeout ago is found lost within the test.
LIMITS = {"time_limit": 4, "index_time_limit": 5, "visibility_timeout": 6}


def test_a_push_whose_message_was_lost_is_sent_again_by_the_sweep(
    tmp_path: Path, broker_redis_url: str, scratch_redis_url: str, postgres_url: str
) -> None:
    """A pushed document lives only in its message: one the broker lost (a worker killed between taking it and
    recording it, a broker restarted without persistence) was gone for good, and a sweep of a pushed
    collection was refused."""
    broker = redis.Redis.from_url(broker_redis_url)
    broker.flushdb()
    redis.Redis.from_url(scratch_redis_url).flushdb()
    collection = unique_name("notes")
    pushed = f"{collection}_pushed"
    with FakeOpenAI(dimensions=8) as openai:
        crm = CrmTable(postgres_url, f"crm_{collection}")
        config = tmp_path / "vectorsync.toml"
        config.write_text(
            settings_toml(
                broker=broker_redis_url,
                cache=scratch_redis_url,
                database=postgres_url,
                openai_url=openai.url,
                table=crm.name,
                collection=collection,
                limits=LIMITS,
                extra=f'[collections.{pushed}.source]\nkind = "push"\n',
            )
        )
        settings = load_settings(config)
        table = settings.vectors.table_prefix + pushed
        producer = Producer(settings)
        producer.index_document(pushed, "lost", "The office opens at nine.")
        producer.index_document(pushed, "delivered", "Parking is behind the building.")
        assert broker.llen(LIVE_QUEUE) == 2
        broker.rpop(LIVE_QUEUE)  # the oldest, "lost": taken by a worker that died before it recorded it
        with celery_worker(config, concurrency=1):
            wait_for(lambda: set(_records(postgres_url, table)) == {"delivered"}, timeout=60, what="the message left")
            time.sleep(LIMITS["visibility_timeout"])
            sweep = producer.reconcile(pushed)
            wait_for(lambda: producer.reindex_status(sweep).status.ended, timeout=60, what="the sweep")
            assert (producer.reindex_status(sweep).status, producer.reindex_status(sweep).total) == (RunStatus.DONE, 1)
            wait_for(lambda: set(_records(postgres_url, table)) == {"lost", "delivered"}, timeout=60, what="the resend")
            wait_for(
                lambda: list(producer.pushes.lost(pushed, older_than=0)) == [], timeout=30, what="the copies to go"
            )
        producer.close()
        crm.close()


def _records(database: str, table: str) -> list[str]:
    return sorted({meta["record_id"] for _, meta in stored_chunks(database, table).values()})
