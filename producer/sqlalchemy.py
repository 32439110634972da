"""Enqueue after a SQLAlchemy session commits: a rolled-back write never reaches a worker.

    index_record("activity_notes", note.id, session=session)   # sent when session commits
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

__all__ = ["after_commit"]

_KEY = "vectorsync.pending"
log = logging.getLogger(__name__)


def after_commit(session: Session, send: Callable[[], Any]) -> None:
    """Call ``send`` once the session's current transaction commits; drop it on rollback."""
    if not event.contains(session, "after_commit", _flush):
        event.listen(session, "after_commit", _flush)
        event.listen(session, "after_rollback", _drop)
    session.info.setdefault(_KEY, []).append(send)


def _flush(session: Session) -> None:
    # The commit has happened: one failed send must not lose the others, nor undo the commit.
    for send in session.info.pop(_KEY, []):
        try:
            send()
        except Exception:
            log.exception("enqueue after commit failed; the reconcile sweep will pick the record up")


def _drop(session: Session) -> None:
    session.info.pop(_KEY, None)
