"""SQL connection helpers shared by the pgvector backend and the state database."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

from store.errors import ConfigError, StoreError, StoreUnavailable
from store.settings import NetworkSettings
from store.settings.network import libpq_parameters, server_settings

log = logging.getLogger(__name__)

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


def make_engine(url: str, *, setting: str, network: NetworkSettings | None = None, **options: Any) -> sa.Engine:
    """A SQLAlchemy engine for ``url``; a malformed URL is a ConfigError naming ``setting``.

    A PostgreSQL engine's connections notice a silent server as ``network`` says (default: the
    ``[network]`` defaults), and have the server notice a silent client alike (``store.settings.network``);
    a libpq parameter the URL sets itself (``?keepalives_idle=60``) wins.
    """
    network = network if network is not None else NetworkSettings()
    try:
        parsed = sa.engine.make_url(engine_url(url))
        postgres = parsed.get_backend_name() == "postgresql"
        if postgres:
            given = set(parsed.query)
            ours = {k: v for k, v in libpq_parameters(network).items() if k not in given}
            options["connect_args"] = {**ours, **options.get("connect_args", {})}
        engine = sa.create_engine(parsed, **options)
        if postgres:
            _server_notices_silence(engine, {**options["connect_args"], **_single(parsed.query)})
    except (sa.exc.ArgumentError, ValueError) as exc:
        raise ConfigError(
            f"{setting} = {safe_url(url)!r} is not a usable database URL ({exc}); "
            "e.g. postgresql://user@host:5432/dbname"
        ) from None
    except ModuleNotFoundError as exc:
        raise ConfigError(f"{setting}: the database driver {exc.name!r} is not installed (pip install it)") from None
    return engine


def _single(query: Mapping[str, str | tuple[str, ...]]) -> dict[str, str]:
    """A URL's query parameters, the last value of each that is given twice."""
    return {k: v if isinstance(v, str) else v[-1] for k, v in query.items()}


def _server_notices_silence(engine: sa.Engine, parameters: Mapping[str, Any]) -> None:
    """Give the server's end of each new connection the same keepalive and TCP_USER_TIMEOUT: a server whose
    client went silent then ends the session, its transaction and its advisory locks with it, within about
    the same time, instead of after the system's two hours (while the client's retry waits on those locks).
    One statement per new connection; a server that refuses a setting (older than PostgreSQL 12) is left as
    it is, said once."""
    values = server_settings(parameters)
    if not values:
        return
    statement = "SELECT " + ", ".join(f"set_config('{name}', %s, false)" for name in values)

    @sa.event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        import psycopg

        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(statement, list(values.values()))
            dbapi_connection.commit()
        except psycopg.Error as exc:
            dbapi_connection.rollback()
            _warn_once(f"PostgreSQL at {engine.url.render_as_string(hide_password=True)} refused the keepalive "
                       f"settings of the server's end ({exc}); a client gone silent keeps its locks until the "
                       "server's own keepalive (tcp_keepalives_idle in postgresql.conf)")
        finally:
            cursor.close()


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning("%s", message)


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
