"""Enqueue after a SQLAlchemy session commits: a rolled-back write never reaches a worker.

    index_record("activity_notes", note.id, session=session)   # sent when session commits

Each enqueue remembers the transaction it was made in (a SAVEPOINT's, when one
is open). Rolling back a savepoint drops only what was enqueued inside it;
rolling back the whole transaction drops everything; the outermost commit
sends what is left.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session, SessionTransaction

__all__ = ["after_commit"]

_KEY = "vectorsync.pending"
log = logging.getLogger(__name__)


def after_commit(session: Session, send: Callable[[], Any]) -> None:
    """Call ``send`` once the session's current transaction commits; drop it on rollback."""
    if not event.contains(session, "after_commit", _flush):
        event.listen(session, "after_commit", _flush)
        event.listen(session, "after_soft_rollback", _drop)
    current = session.get_nested_transaction() or session.get_transaction()
    session.info.setdefault(_KEY, []).append((current, send))


def _flush(session: Session) -> None:
    root = session.get_transaction()
    if root is not None and root.is_active:  # a SAVEPOINT was released: the real commit is still to come
        return
    # The commit has happened: one failed send must not lose the others, nor undo the commit.
    for _, send in session.info.pop(_KEY, []):
        try:
            send()
        except Exception:
            log.exception("enqueue after commit failed; the reconcile sweep will pick the record up")


def _within(transaction: SessionTransaction | None, rolled_back: SessionTransaction) -> bool:
    while transaction is not None:
        if transaction is rolled_back:
            return True
        transaction = transaction.parent
    return False


def _drop(session: Session, previous_transaction: SessionTransaction) -> None:
    """Forget the enqueues made inside the transaction (or savepoint) just rolled back, and only those."""
    pending = session.info.get(_KEY)
    if pending:
        session.info[_KEY] = [(tx, send) for tx, send in pending if not _within(tx, previous_transaction)]
