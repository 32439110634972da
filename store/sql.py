"""SQL connection helpers shared by the pgvector backend and the state database."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

from store.errors import StoreError, StoreUnavailable

__all__ = ["engine_url", "safe_url", "transaction"]


def engine_url(url: str) -> str:
    """Point a plain ``postgresql://`` URL at psycopg 3, SQLAlchemy's default being psycopg2."""
    return re.sub(r"^(postgres|postgresql)(\+psycopg2?)?://", "postgresql+psycopg://", url)


def safe_url(url: str) -> str:
    """The URL with its password hidden, for messages and logs."""
    try:
        return sa.engine.make_url(engine_url(url)).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return "<unparseable URL>"


@contextmanager
def transaction(engine: sa.Engine, what: str) -> Iterator[sa.Connection]:
    """A connection in a transaction. Connection failures become StoreUnavailable (retry later),
    other driver errors StoreError; ``what`` names the database in the message."""
    try:
        with engine.begin() as conn:
            yield conn
    except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
        raise StoreUnavailable(f"{what} failed: {exc.orig}") from exc
    except sa.exc.DBAPIError as exc:
        raise StoreError(f"{what} refused a statement: {exc.orig}") from exc
