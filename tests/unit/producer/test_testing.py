"""An app's own tests, written as an app writes them: only ``producer``, ``store.query`` and the public
testing kit (``producer.pytest_plugin``). Its notes live in SQLite; nothing else runs: no broker, no
database server, no worker process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import producer
from producer import testing
from producer.testing import TaskQueue
from store import ConfigError
from store.contract import INDEX_RECORD, LIVE_QUEUE
from store.query import answer, search

pytest_plugins = ["producer.pytest_plugin"]


class Base(DeclarativeBase):
    pass


class Note(Base):
    __tablename__ = "notes"
    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str]
    body: Mapped[str]


def save_note(session: Session, kind: str, body: str) -> int:
    """The app's code under test: save a note and index it once the session commits."""
    note = Note(kind=kind, body=body)
    session.add(note)
    session.flush()
    producer.index_record("notes", note.id, session=session)
    session.commit()
    return note.id


@pytest.fixture
def database(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    engine = sa.create_engine(url)
    Base.metadata.create_all(engine)
    engine.dispose()
    yield url


@pytest.fixture
def vectorsync_settings(database: str) -> dict[str, Any]:
    """What the app's vectorsync.toml would say; the kit swaps the store, the models and the broker."""
    return {
        "vectors": {"store": "pgvector", "url": "postgresql://app@db.invalid/app", "dimensions": 64},
        "worker": {"batch_size": 10},
        "collections": {
            "notes": {
                "source": {"kind": "sql", "url": database, "table": "notes", "text": "{body}", "metadata": ["kind"]}
            },
            "uploads": {"source": {"kind": "push"}},
        },
    }


def test_a_saved_note_is_found_once_the_queue_has_run(vectorsync_queue: TaskQueue, database: str) -> None:
    with Session(sa.create_engine(database)) as session:
        call = save_note(session, "call", "Dana asked to move the onboarding call to Friday")
        email = save_note(session, "email", "The invoice for March was paid in full")
    assert [(t.name, t.args) for t in vectorsync_queue.pending] == [
        ("vectorsync.index_record", ["notes", str(call)]),
        ("vectorsync.index_record", ["notes", str(email)]),
    ]
    assert search("notes", "onboarding call") == []  # sent, not yet run
    assert vectorsync_queue.run_queue() == 2
    [best] = search("notes", "move the onboarding call", limit=1)
    assert (best.metadata["record_id"], best.metadata["kind"]) == (str(call), "call")
    assert search("notes", "onboarding call", filter={"kind": "email"})[0].metadata["record_id"] == str(email)
    assert answer("notes", "When is the onboarding call?").answered


def test_a_reindex_runs_the_batches_it_fans_out(vectorsync_queue: TaskQueue, database: str) -> None:
    with Session(sa.create_engine(database)) as session:
        session.add_all(Note(kind="note", body=f"note number {i} about topic{i}") for i in range(25))
        session.commit()
    run_id = producer.reindex_all("notes")
    assert vectorsync_queue.run_pending() == 1  # the reindex itself: it sends its batches, which wait
    assert {t.name for t in vectorsync_queue.pending} == {"vectorsync.index_batch"}
    assert len(vectorsync_queue.pending) == 3  # 25 ids in batches of worker.batch_size (10)
    vectorsync_queue.run_queue()
    progress = producer.reindex_status(run_id)
    assert (progress.status, progress.done, progress.failed) == ("done", 25, 0)
    assert search("notes", "note number 17 about topic17", limit=1)[0].metadata["record_id"] == "18"


def test_pushed_documents_are_indexed_and_deleted(vectorsync_queue: TaskQueue) -> None:
    producer.index_document("uploads", "doc-7", "Quarterly pricing review for the annual plan", {"kind": "pdf"})
    vectorsync_queue.run_queue()
    assert [m.metadata["record_id"] for m in search("uploads", "annual pricing")] == ["doc-7"]
    producer.delete_document("uploads", "doc-7")
    vectorsync_queue.run_queue()
    assert search("uploads", "annual pricing") == []


def test_a_task_that_fails_fails_the_test_with_the_workers_error(vectorsync_queue: TaskQueue) -> None:
    # A pushed collection has no source to read a record from. This producer refuses to send that; one whose
    # settings declare no collection sends it, and the worker's error is what the test sees.
    vectorsync_queue.producer.send(INDEX_RECORD, args=("uploads", "1"), queue=LIVE_QUEUE)
    with pytest.raises(ConfigError, match="has no source to read records from"):
        vectorsync_queue.run_queue()


def test_a_source_that_is_down_is_retried_as_a_worker_would_then_fails() -> None:
    with testing.queue(
        {
            "worker": {"max_retries": 2},
            "collections": {
                "notes": {
                    "source": {
                        "kind": "sql",
                        "url": "sqlite:////nonexistent/app.db",
                        "table": "notes",
                        "text": "{body}",
                    }
                }
            },
        }
    ) as down:
        producer.index_record("notes", 1)
        assert down.run_queue() == 3  # the task, then its two retries, each back at the end of the queue
        assert [t.retries for t in down.done] == [0, 1, 2]
        [failure] = down.ledger.failures()
        assert failure.record_id == "1" and "gave up after 2 retries" in failure.error
