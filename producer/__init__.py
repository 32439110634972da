"""What app code imports to keep its vector index in sync.

    from producer import index_record, reindex_all, reindex_status
    index_record("activity_notes", note.id)                     # now
    index_record("activity_notes", note.id, session=session)    # when the session commits
    doc_id = index_document("uploads", text=text, metadata={"url": url})  # the id: given, a field, or a hash
    run_id = reindex_all("activity_notes")

Tasks are sent by name: importing this loads no embedding client, numpy,
torch or qdrant-client; nor the settings or Celery until a function is called, so the ``vectorsync`` command
(``producer.cli``, a package under this one) starts without them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from store.broker.producer import Producer
    from store.state.ledger import RunProgress

__all__ = ["delete_document", "index_document", "index_record", "reindex_all", "reindex_status"]


def default_producer() -> Producer:
    """``store.process.defaults.default_producer()``, imported on first call (it loads the settings and Celery)."""
    from store.process.defaults import default_producer as built

    return built()


def index_record(collection: str, record_id: str | int, *, session: Session | None = None) -> None:
    """Enqueue the record ``record_id``; with ``session``, only once that session commits."""
    producer = default_producer()
    if session is None:
        producer.index_record(collection, record_id)
        return
    from producer.sqlalchemy import after_commit

    after_commit(session, lambda: producer.index_record(collection, record_id))


@overload
def index_document(
    collection: str,
    id: str | int | None,
    text: str,
    metadata: Mapping[str, Any] | None = None,
    *,
    version: int | None = None,
) -> str: ...


@overload
def index_document(
    collection: str, *, text: str, metadata: Mapping[str, Any] | None = None, version: int | None = None
) -> str: ...


def index_document(
    collection: str,
    id: str | int | None = None,
    text: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    *,
    version: int | None = None,
) -> str:
    """Enqueue a document pushed with its content; returns its id: ``id``, else the metadata field
    ``collections.NAME.source.id_field`` names, else a hash of the text and metadata. ``version`` orders its
    sends (default: the clock every producer shares). A missing ``text`` is a ConfigError the producer raises."""
    return default_producer().index_document(
        collection,
        id,
        text,  # type: ignore[arg-type]
        metadata,
        version=version,
    )


def delete_document(collection: str, id: str | int, *, version: int | None = None) -> None:
    """Enqueue the removal of a pushed document; ``version`` as ``index_document``'s."""
    default_producer().delete_document(collection, id, version=version)


def reindex_all(collection: str, *, full: bool = False, allow_empty: bool = False) -> str:
    """Start a reindex of ``collection``; returns the run id to follow with ``reindex_status``."""
    return default_producer().reindex_all(collection, full=full, allow_empty=allow_empty)


def reindex_status(run_id: str) -> RunProgress:
    """The run's ``status`` (running, done, failed) and ``total``, ``done``, ``skipped``, ``failed``."""
    return default_producer().reindex_status(run_id)
