"""Enqueue after commit (producer/sqlalchemy.py), against a real Redis broker and PostgreSQL: ``index_record``
with ``session=`` sends once the session commits, never on a rollback, and a rolled back savepoint drops only
what was enqueued inside it."""

from __future__ import annotations

import redis
import sqlalchemy as sa
from sqlalchemy.orm import Session

import producer
from store.broker.producer import Producer
from store.contract import INDEX_RECORD
from tests.integration.sending import queued


def test_enqueue_waits_for_the_session_to_commit(sender: Producer, broker: redis.Redis, postgres_url: str) -> None:
    engine = sa.create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://"))
    with Session(engine) as session:
        session.execute(sa.text("SELECT 1"))
        producer.index_record("notes", 1, session=session)
        assert queued(broker) == []
        session.rollback()
        assert queued(broker) == []  # rolled back: never sent
        producer.index_record("notes", 2, session=session)
        session.commit()
        assert queued(broker) == [(INDEX_RECORD, ["notes", "2"])]
        session.commit()  # a later commit sends nothing again
        assert len(queued(broker)) == 1
    engine.dispose()


def test_a_rolled_back_savepoint_drops_only_what_was_enqueued_inside_it(
    sender: Producer, broker: redis.Redis, postgres_url: str
) -> None:
    engine = sa.create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://"))
    with Session(engine) as session:
        session.execute(sa.text("SELECT 1"))
        producer.index_record("notes", 1, session=session)
        savepoint = session.begin_nested()
        producer.index_record("notes", 2, session=session)
        savepoint.rollback()
        inner = session.begin_nested()
        producer.index_record("notes", 3, session=session)
        inner.commit()  # released: its enqueue waits for the outer commit
        assert queued(broker) == []
        session.commit()
        assert sorted(queued(broker)) == [(INDEX_RECORD, ["notes", "1"]), (INDEX_RECORD, ["notes", "3"])]
    engine.dispose()
