"""Enqueue after a SQLAlchemy session commits: a rolled-back write never reaches a worker.

    index_record("activity_notes", note.id, session=session)   # sent when session commits
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

__all__ = ["after_commit"]

_KEY = "vectorsync.pending"


def after_commit(session: Session, send: Callable[[], Any]) -> None:
    """Call ``send`` once the session's current transaction commits; drop it on rollback."""
    pending: list[Callable[[], Any]] | None = session.info.get(_KEY)
    if pending is None:
        pending = session.info[_KEY] = []
        event.listen(session, "after_commit", _flush)
        event.listen(session, "after_rollback", _drop)
    pending.append(send)


def _flush(session: Session) -> None:
    pending = session.info.pop(_KEY, [])
    _unlisten(session)
    for send in pending:
        send()


def _drop(session: Session) -> None:
    session.info.pop(_KEY, None)
    _unlisten(session)


def _unlisten(session: Session) -> None:
    for name, handler in (("after_commit", _flush), ("after_rollback", _drop)):
        if event.contains(session, name, handler):
            event.remove(session, name, handler)
