"""SQL connection helpers shared by the pgvector backend and the state database."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

from store.errors import ConfigError, StoreError, StoreUnavailable

__all__ = ["advisory_lock", "engine_url", "make_engine", "retryable", "safe_url", "transaction", "translate"]


def engine_url(url: str) -> str:
    """Point a plain ``postgresql://`` URL at psycopg 3, SQLAlchemy's default being psycopg2."""
    return re.sub(r"^(postgres|postgresql)(\+psycopg2?)?://", "postgresql+psycopg://", url)


def safe_url(url: str) -> str:
    """The URL with its password hidden (also one passed as ``?password=``), for messages and logs."""
    try:
        parsed = sa.engine.make_url(engine_url(url))
    except (sa.exc.ArgumentError, ValueError):
        return "<unparseable URL>"
    hidden = {k: "***" for k in parsed.query if any(s in k.lower() for s in ("password", "key", "token", "secret"))}
    return parsed.update_query_dict(hidden).render_as_string(hide_password=True)


def make_engine(url: str, *, setting: str, **options: Any) -> sa.Engine:
    """A SQLAlchemy engine for ``url``; a malformed URL is a ConfigError naming ``setting``."""
    try:
        return sa.create_engine(engine_url(url), **options)
    except (sa.exc.ArgumentError, ValueError) as exc:
        raise ConfigError(
            f"{setting} = {safe_url(url)!r} is not a usable database URL ({exc}); "
            "e.g. postgresql://user@host:5432/dbname"
        ) from None
    except ModuleNotFoundError as exc:
        raise ConfigError(f"{setting}: the database driver {exc.name!r} is not installed (pip install it)") from None


def advisory_lock(conn: sa.Connection, key: str) -> None:
    """PostgreSQL's advisory lock on ``key`` until the transaction ends: serializes schema changes (and the
    writers of one alias) across processes. The one place the key is hashed, so every taker agrees on it."""
    conn.execute(sa.select(sa.func.pg_advisory_xact_lock(sa.func.hashtextextended(key, 0))))


def retryable(error: BaseException) -> bool:
    """Whether a driver error can go away by itself (the server down, a deadlock), not a refusal of the data.

    psycopg files an over-long index row (ProgramLimitExceeded) under OperationalError; it is the data's fault.
    """
    import psycopg

    if isinstance(error, psycopg.errors.ProgramLimitExceeded | psycopg.DataError | psycopg.IntegrityError):
        return False
    return isinstance(error, psycopg.OperationalError | psycopg.InterfaceError)


def translate(exc: BaseException, what: str) -> StoreError:
    """The store error a driver error stands for: StoreUnavailable (retry later) or StoreError (refused)."""
    orig = getattr(exc, "orig", None) or exc
    if retryable(orig) or (isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError)
                           and not _driver_error(orig)):
        return StoreUnavailable(f"{what} failed: {orig}")
    return StoreError(f"{what} refused a statement: {orig}")


def _driver_error(error: BaseException) -> bool:
    import psycopg

    return isinstance(error, psycopg.Error)


@contextmanager
def transaction(engine: sa.Engine, what: str) -> Iterator[sa.Connection]:
    """A connection in a transaction. Connection failures and deadlocks become StoreUnavailable (retry
    later), refusals of the data (too long, out of range, unconvertible) StoreError; ``what`` names the database."""
    try:
        with engine.begin() as conn:
            yield conn
    except sa.exc.DBAPIError as exc:
        raise translate(exc, what) from exc
    except Exception as exc:  # raw psycopg calls (COPY, LOCK) bypass SQLAlchemy's wrapping
        if _driver_error(exc):
            raise translate(exc, what) from exc
        raise
