"""A task's soft time limit that lands inside a SQL statement, on real PostgreSQL: it comes out as itself (the
task then retries its records), and the pooled connection it interrupted is never handed out again."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from types import FrameType

import pytest
import sqlalchemy as sa
from celery.exceptions import SoftTimeLimitExceeded

from store.connect.postgres import make_engine, transaction


@pytest.fixture
def engine(postgres_url: str) -> Iterator[sa.Engine]:
    made = make_engine(postgres_url, setting="state.url", pool_size=1, pool_pre_ping=True)
    yield made
    made.dispose()


def _soft_limit(_signum: int, _frame: FrameType | None) -> None:
    raise SoftTimeLimitExceeded()


@pytest.fixture
def soft_limit_after() -> Iterator[object]:
    """Arm Celery's soft limit as its pool process does: a signal whose handler raises in whatever runs."""
    before = signal.signal(signal.SIGALRM, _soft_limit)

    def arm(seconds: float) -> None:
        signal.setitimer(signal.ITIMER_REAL, seconds)

    yield arm
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, before)


@pytest.mark.parametrize("autocommit", [True, False], ids=["one-statement read", "transaction"])
def test_a_soft_limit_inside_a_statement_is_raised_as_itself(
    engine: sa.Engine, soft_limit_after: object, autocommit: bool
) -> None:
    """It was a StoreUnavailable (the failed rollback after it) or SQLAlchemy's StatementError (a bug, so the
    records failed) depending on where it landed."""
    target = engine.execution_options(isolation_level="AUTOCOMMIT") if autocommit else engine
    for delay in (0.05, 0.2, 0.5):
        soft_limit_after(delay)  # type: ignore[operator]
        with pytest.raises(SoftTimeLimitExceeded), transaction(target, "state database") as conn:
            conn.execute(sa.text("SELECT pg_sleep(3)")).all()
        with transaction(target, "state database") as conn:
            assert conn.execute(sa.text("SELECT 1")).scalar() == 1


def test_a_pooled_connection_left_mid_statement_is_replaced(postgres_url: str) -> None:
    """Its pre-ping failed with "can't change 'autocommit' now: connection in transaction status ACTIVE",
    which reached the caller (a reindex run ended failed) instead of a fresh connection. Without a rollback on
    return, the pool keeps such a connection, as it can when the limit interrupts that rollback."""
    engine = make_engine(postgres_url, setting="source.url", pool_size=1, pool_pre_ping=True, pool_reset_on_return=None)
    try:
        left = engine.raw_connection()
        left.dbapi_connection.pgconn.send_query(b"SELECT pg_sleep(1)")  # type: ignore[union-attr]
        left.close()
        with transaction(engine.execution_options(isolation_level="AUTOCOMMIT"), "source database") as conn:
            assert conn.execute(sa.text("SELECT 1")).scalar() == 1
    finally:
        engine.dispose()
