"""SQL connection helpers of every PostgreSQL we talk to: the state database, pgvector, capture and SQL sources."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, cast

import psycopg
import sqlalchemy as sa

from store.errors import ConfigError, StoreError, StoreUnavailable
from store.settings import NetworkSettings
from store.settings.network import libpq_parameters, server_settings

log = logging.getLogger(__name__)

__all__ = [
    "advisory_lock",
    "driver",
    "engine_url",
    "interruption",
    "make_engine",
    "retryable",
    "safe_url",
    "transaction",
    "translate",
]


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


#: How often a running statement's backend checks that its client is still there (PostgreSQL 14 and later).
CLIENT_CHECK, CLIENT_CHECK_INTERVAL = "client_connection_check_interval", "2s"


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
            sa.event.listen(engine, "handle_error", _ping_failed_is_lost)
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
    And ``CLIENT_CHECK``: a statement whose client died (a worker killed with kill -9) ends within
    ``CLIENT_CHECK_INTERVAL``, rather than run on (an index build, a wait on a lock) holding its locks.
    One statement per new connection; a server that refuses a setting (older than PostgreSQL 12) is left as
    it is, said once."""
    keepalive = server_settings(parameters)
    # The fallback sets the keepalive alone; over a Unix socket there is none, and nothing to fall back to.
    statements = [
        _set_config(values) for values in (keepalive | {CLIENT_CHECK: CLIENT_CHECK_INTERVAL}, keepalive) if values
    ]

    @sa.event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        import psycopg

        for statement, values in statements:  # a server older than 14 refuses CLIENT_CHECK: without it
            try:
                with dbapi_connection.cursor() as cursor:
                    cursor.execute(statement, values)
                dbapi_connection.commit()
                return
            except psycopg.Error as exc:
                dbapi_connection.rollback()
                refused = exc
        _warn_once(
            f"PostgreSQL at {engine.url.render_as_string(hide_password=True)} refused the keepalive "
            f"settings of the server's end ({refused}); a client gone silent keeps its locks until the "
            "server's own keepalive (tcp_keepalives_idle in postgresql.conf)"
        )


def _set_config(values: Mapping[str, str]) -> tuple[str, list[str]]:
    """One statement that sets ``values`` for the session, and its parameters."""
    return "SELECT " + ", ".join(f"set_config('{name}', %s, false)" for name in values), list(values.values())


def _ping_failed_is_lost(context: sa.engine.ExceptionContext) -> None:
    """A connection whose pre-ping fails for any reason is replaced, not handed out. A signal (a task's soft
    time limit) that interrupts a statement can leave a pooled connection mid-command; its ping then fails
    with "can't change 'autocommit' now: connection in transaction status ACTIVE", which SQLAlchemy would
    otherwise raise to the caller (a run failed) rather than take for a lost connection."""
    if context.is_pre_ping and not context.is_disconnect:
        log.warning("replacing a pooled database connection whose ping failed: %s", context.original_exception)
        context.is_disconnect = True


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning("%s", message)


def driver(conn: sa.Connection) -> psycopg.Connection[Any]:
    """The psycopg connection under ``conn``: for pipelines, COPY and ``psycopg.sql`` statements."""
    raw = conn.connection.driver_connection
    if raw is None:
        raise StoreError("the database connection is closed")
    return cast("psycopg.Connection[Any]", raw)


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


def translate(exc: BaseException, what: str) -> BaseException:
    """The store error a driver error stands for: StoreUnavailable (retry later) or StoreError (refused); or the
    time limit that interrupted the statement, as itself (``interruption``)."""
    limit = interruption(exc)
    if limit is not None:
        return limit
    orig = getattr(exc, "orig", None) or exc
    if retryable(orig) or (
        isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError) and not _driver_error(orig)
    ):
        return StoreUnavailable(f"{what} failed: {orig}")
    return StoreError(f"{what} refused a statement: {orig}")


def interruption(exc: BaseException) -> BaseException | None:
    """The soft time limit that interrupted a statement, found where SQLAlchemy put it: inside a StatementError
    (``orig``), or behind the error of the rollback that followed (``__context__``). Celery raises it from a
    signal handler, in whatever driver call is running; told as a database error it would fail the records
    or the run, where the task means to retry them before its hard limit. None when none did."""
    from celery.exceptions import SoftTimeLimitExceeded

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, SoftTimeLimitExceeded):
            return cast(BaseException, current)
        seen.add(id(current))
        orig = getattr(current, "orig", None)
        current = orig if isinstance(orig, BaseException) else current.__cause__ or current.__context__
    return None


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
        if _driver_error(exc) or interruption(exc) is not None:
            raise translate(exc, what) from exc
        raise
