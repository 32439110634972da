"""Enqueue after a SQLAlchemy session commits: sent at the outermost commit, dropped with a rollback, a savepoint's
rollback dropping only what was enqueued inside it, and one failed send not losing the others."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from producer.sqlalchemy import after_commit


@pytest.fixture
def session() -> Iterator[Session]:
    engine = sa.create_engine("sqlite://")
    with Session(engine) as made:
        yield made
    engine.dispose()


def test_what_is_enqueued_is_sent_when_the_session_commits_and_not_before(session: Session) -> None:
    sent: list[str] = []
    session.execute(sa.text("SELECT 1"))
    after_commit(session, lambda: sent.append("a"))
    after_commit(session, lambda: sent.append("b"))
    assert sent == []
    session.commit()
    assert sent == ["a", "b"]
    session.commit()  # nothing is sent twice
    assert sent == ["a", "b"]


def test_a_rollback_drops_what_was_enqueued(session: Session) -> None:
    sent: list[str] = []
    session.execute(sa.text("SELECT 1"))
    after_commit(session, lambda: sent.append("a"))
    session.rollback()
    session.commit()
    assert sent == []


def test_a_savepoint_rolled_back_drops_only_what_was_enqueued_inside_it(session: Session) -> None:
    sent: list[str] = []
    session.execute(sa.text("SELECT 1"))
    after_commit(session, lambda: sent.append("outer"))
    inner = session.begin_nested()
    after_commit(session, lambda: sent.append("inner"))
    inner.rollback()
    kept = session.begin_nested()
    after_commit(session, lambda: sent.append("released"))
    kept.commit()  # a savepoint released: the real commit is still to come
    assert sent == []
    session.commit()
    assert sent == ["outer", "released"]


def test_one_send_that_fails_loses_neither_the_others_nor_the_commit(
    session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    sent: list[str] = []

    def failing() -> None:
        raise ConnectionError("broker down")

    session.execute(sa.text("SELECT 1"))
    after_commit(session, failing)
    after_commit(session, lambda: sent.append("b"))
    session.commit()
    assert sent == ["b"]
    assert "broker down" in caplog.text
