"""SQL connection helpers shared by the pgvector backend and the state database."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

from store.errors import ConfigError, StoreError, StoreUnavailable

__all__ = ["engine_url", "make_engine", "safe_url", "transaction"]


def engine_url(url: str) -> str:
    """Point a plain ``postgresql://`` URL at psycopg 3, SQLAlchemy's default being psycopg2."""
    return re.sub(r"^(postgres|postgresql)(\+psycopg2?)?://", "postgresql+psycopg://", url)


def safe_url(url: str) -> str:
    """The URL with its password hidden, for messages and logs."""
    try:
        return sa.engine.make_url(engine_url(url)).render_as_string(hide_password=True)
    except (sa.exc.ArgumentError, ValueError):
        return "<unparseable URL>"


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
    except Exception as exc:  # raw psycopg calls (COPY, LOCK) bypass SQLAlchemy's wrapping
        import psycopg

        if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):  # deadlocks included: retry
            raise StoreUnavailable(f"{what} failed: {exc}") from exc
        if isinstance(exc, psycopg.Error):
            raise StoreError(f"{what} refused a statement: {exc}") from exc
        raise
