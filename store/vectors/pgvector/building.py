"""A deferred index build that outlives the task waiting for it (docs/operations.md#index-builds).

Each ``CREATE INDEX`` is sent on a session of its own, in autocommit, that holds the table's build lock (an
advisory lock) and does not check for its client while a statement runs; so a task that stops waiting (at its
time limit) leaves the statement to finish and commit, and the next task waits for that build instead of
starting another. ``statement_timeout`` ends a build at its deadline. Every build, deferred or not, is given
memory for its whole graph and PostgreSQL's parallel workers (``prepare_build``).
"""

from __future__ import annotations

import logging
import select
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg import pq
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateIndex

from store.errors import StoreError, StoreUnavailable

__all__ = [
    "BUILD_LIMIT_SETTING",
    "MAX_BUILD_MEMORY_MB",
    "BuildProgress",
    "BuildWatch",
    "IndexBuild",
    "build_lock_key",
    "build_memory_mb",
    "prepare_build",
    "read_progress",
]

_log = logging.getLogger(__name__)

#: The setting that bounds a build, named in the message of a run whose build did not end in time.
BUILD_LIMIT_SETTING = "worker.index_time_limit"
#: Seconds between looks at a running build.
POLL_SECONDS = 1.0
#: Seconds past its deadline a build of the table may still hold its lock (its statement_timeout fires as it
#: can) before a task waiting for it ends its run failed all the same.
OVERRUN_SECONDS = 30.0
#: A build is not started with less time than this left before its deadline (one cancelled at its deadline,
#: a moment early by the clocks, is not started again).
MIN_BUILD_SECONDS = 1.0
#: The most memory one HNSW build is given (a million 1536-d vectors need about this much).
MAX_BUILD_MEMORY_MB = 8192

_PROGRESS = sa.text(
    "SELECT a.pid, extract(epoch FROM now() - a.query_start) AS seconds, a.wait_event_type, p.phase, "
    "coalesce(p.blocks_done, 0) AS blocks_done, coalesce(p.blocks_total, 0) AS blocks_total, "
    "coalesce(p.tuples_done, 0) AS tuples_done, coalesce(p.tuples_total, 0) AS tuples_total, "
    "i.relname AS index_name "
    "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
    "LEFT JOIN pg_stat_progress_create_index p ON p.pid = a.pid "
    "LEFT JOIN pg_class i ON i.oid = p.index_relid "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
    "AND ((l.classid::int8 << 32) | l.objid::int8) = hashtextextended(:key, 0) LIMIT 1"
)


def prepare_build(conn: sa.Connection, table: sa.Table, *, dimensions: int, m: int, workers: int) -> None:
    """Size this transaction's HNSW build: memory for the whole graph (else the build slows several times
    once it spills) and PostgreSQL's parallel build workers."""
    rows = conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
    megabytes = build_memory_mb(rows, dimensions=dimensions, m=m)
    conn.execute(sa.select(sa.func.set_config("maintenance_work_mem", f"{megabytes}MB", sa.true())))
    conn.execute(sa.select(sa.func.set_config("max_parallel_maintenance_workers", str(workers), sa.true())))


def build_memory_mb(rows: int, *, dimensions: int, m: int) -> int:
    """The maintenance_work_mem an HNSW build of ``rows`` vectors gets: the whole graph, 30% spare, capped."""
    per_row = dimensions * 4 + m * 2 * 16 + 200  # the vector, its neighbour lists, the element's bookkeeping
    return min(max(64, int(rows * per_row * 1.3 / 2**20)), MAX_BUILD_MEMORY_MB)


def build_lock_key(table: str) -> str:
    """The advisory lock a build of ``table``'s indexes holds (``store.connect.postgres.advisory_lock``'s key)."""
    return f"{table}:build"


@dataclass(frozen=True)
class BuildProgress:
    """A running build, as PostgreSQL reports it (``pg_stat_progress_create_index``)."""

    pid: int
    seconds: float
    phase: str
    index: str | None = None
    blocks_done: int = 0
    blocks_total: int = 0
    tuples_done: int = 0
    tuples_total: int = 0

    @property
    def fraction(self) -> float | None:
        """How much of the current phase is done, when PostgreSQL counts it."""
        for done, total in ((self.tuples_done, self.tuples_total), (self.blocks_done, self.blocks_total)):
            if total > 0:
                return min(done / total, 1.0)
        return None

    def describe(self) -> str:
        """One line: ``vs_notes_embedding_idx: building index: loading tuples 12,000/40,000 tuples (30%), 12 s``."""
        counts = ""
        if self.tuples_total:
            counts = f" {self.tuples_done:,}/{self.tuples_total:,} tuples"
        elif self.blocks_total:
            counts = f" {self.blocks_done:,}/{self.blocks_total:,} blocks"
        share = "" if self.fraction is None else f" ({self.fraction:.0%})"
        where = f"{self.index}: " if self.index else ""
        return f"{where}{self.phase}{counts}{share}, {self.seconds:.0f} s"


def read_progress(conn: sa.Connection, table: str) -> BuildProgress | None:
    """The build of ``table``'s indexes under way (by the holder of its build lock), or None."""
    row = conn.execute(_PROGRESS, {"key": build_lock_key(table)}).one_or_none()
    if row is None:
        return None
    phase = row.phase or ("waiting for a lock" if row.wait_event_type == "Lock" else "between indexes")
    return BuildProgress(
        pid=int(row.pid),
        seconds=float(row.seconds or 0),
        phase=str(phase),
        index=row.index_name,
        blocks_done=int(row.blocks_done),
        blocks_total=int(row.blocks_total),
        tuples_done=int(row.tuples_done),
        tuples_total=int(row.tuples_total),
    )


class BuildWatch:
    """The builds under way of a store's tables, for ``status`` and ``reindex --wait``: one engine, and no store
    opened (nothing created, nothing locked)."""

    def __init__(self, engine: sa.Engine, table_prefix: str) -> None:
        self.engine, self.table_prefix = engine, table_prefix

    def progress(self, collection: str) -> BuildProgress | None:
        """The build of ``collection``'s indexes under way, or None. Raises StoreUnavailable."""
        try:
            with self.engine.connect() as conn:
                return read_progress(conn, self.table_prefix + collection)
        except sa.exc.DBAPIError as exc:
            raise StoreUnavailable(f"PostgreSQL could not be asked for the index builds: {exc}") from exc

    def close(self) -> None:
        self.engine.dispose()


class IndexBuild:
    """The build of a table's missing ``indexes``, waited for until ``until`` (``time.monotonic()``), bounded
    by ``deadline`` (``time.time()``, from when the run's build began) and by ``limit`` (the setting's value)."""

    def __init__(self, engine: sa.Engine, table: str, indexes: Sequence[sa.Index], *, settings: dict[str, str]) -> None:
        self.engine, self.table, self.settings = engine, table, settings
        #: The vector index first: the long build, which the others' time must not keep from its budget.
        self.indexes = sorted(indexes, key=lambda i: (not str(i.name).endswith("_embedding_idx"), str(i.name)))
        self.last: BuildProgress | None = None

    def run(self, *, until: float, deadline: float, limit: int) -> bool:
        """True once every index exists; False when ``until`` came first (a build may go on without us).

        Raises StoreError when the build cannot end by its deadline, StoreUnavailable when PostgreSQL cannot be
        reached."""
        while True:
            missing = self._missing()
            if not missing:
                return True
            holder = self._watch()
            overrun = time.time() - deadline
            if overrun >= -MIN_BUILD_SECONDS and (holder is None or overrun >= OVERRUN_SECONDS):
                raise StoreError(self._too_long(limit, deadline))
            if holder is not None:
                if not _sleep_until(until):
                    return False
                continue
            if not self._build(until=until, deadline=deadline):
                return False

    def _missing(self) -> list[sa.Index]:
        with self.engine.connect() as conn:
            found = {str(i["name"]) for i in sa.inspect(conn).get_indexes(self.table)}
        return [i for i in self.indexes if i.name not in found]

    def _watch(self) -> BuildProgress | None:
        with self.engine.connect() as conn:
            progress = read_progress(conn, self.table)
        if progress is not None:
            self.last = progress
            _log.debug("the index build of %s is under way: %s", self.table, progress.describe())
        return progress

    def _build(self, *, until: float, deadline: float) -> bool:
        """Build the missing indexes on a session of its own; False when ``until`` came first: the session is left to
        finish its statement (and commit it), and holds the build lock until then."""
        session = _connect(self.engine, self.settings)
        left = False
        try:
            if not _query(session, "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", build_lock_key(self.table)):
                return True  # another build took it first: the caller watches that one
            # Asked again under the lock: a build that committed after ``missing`` was read (and then let the
            # lock go) has made its index, which is not built twice.
            for index in self._missing():
                timeout = max(int((deadline - time.time()) * 1000), 1)
                _query(session, "SELECT set_config('statement_timeout', %s, false)", str(timeout))
                _log.info("building %s of %s (statement_timeout %d ms)", index.name, self.table, timeout)
                statement = str(CreateIndex(index, if_not_exists=True).compile(dialect=postgresql.dialect()))  # type: ignore[no-untyped-call]
                if not _send(session, statement, until=until, watch=self._watch):
                    left = True
                    _log.info("the build of %s goes on in PostgreSQL (pid %d)", index.name, session.info.backend_pid)
                    return False
            return True
        except psycopg.errors.QueryCanceled:
            return True  # past its deadline: run() says so
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"PostgreSQL went away during the index build of {self.table}: {exc}") from exc
        finally:
            _close(session, left=left)

    def _too_long(self, limit: int, deadline: float) -> str:
        took = time.time() - (deadline - limit)
        needed = ""
        if self.last is not None and self.last.fraction:
            needed = f", {self.last.describe()}: about {self.last.seconds / self.last.fraction:,.0f} s in all"
        return (
            f"the vector index of {self.table} was not built within {BUILD_LIMIT_SETTING} ({limit} s): the build "
            f"ran {took:,.0f} s{needed}; raise {BUILD_LIMIT_SETTING} and reindex"
        )


def _connect(engine: sa.Engine, settings: dict[str, str]) -> psycopg.Connection[Any]:
    """A session of its own, in autocommit, with ``settings``, that goes on with a statement whose client has
    gone."""
    try:
        proxy = engine.raw_connection()
        raw: psycopg.Connection[Any] = proxy.driver_connection  # type: ignore[assignment]
        proxy.detach()  # never back to the pool: it may be left with a statement running
        raw.rollback()
        raw.autocommit = True
        for name, value in (_SESSION | settings).items():
            _query(raw, "SELECT set_config(%s, %s, false)", name, value)
        return raw
    except (sa.exc.DBAPIError, psycopg.OperationalError) as exc:
        raise StoreUnavailable(f"PostgreSQL could not be reached to build an index: {exc}") from exc


#: The build session's settings: no check for a gone client (a task that stops waiting leaves the build to end),
#: and no notice sent to it (a write to a client that has gone would end the session before its commit).
_SESSION = {"client_connection_check_interval": "0", "client_min_messages": "error"}
#: SQLSTATE of a statement cancelled (by its statement_timeout).
QUERY_CANCELED = b"57014"


def _query(session: psycopg.Connection[Any], statement: str, *params: Any) -> Any:
    return session.execute(statement.encode(), params).fetchone()[0]  # type: ignore[index]


def _send(session: psycopg.Connection[Any], statement: str, *, until: float, watch: Callable[[], Any]) -> bool:
    """Run ``statement`` without blocking past ``until``; True once it has ended (raising its error)."""
    conn = session.pgconn
    conn.send_query(statement.encode())
    while conn.is_busy():
        if time.monotonic() >= until:
            return False
        select.select([conn.socket], [], [], POLL_SECONDS)
        conn.consume_input()
        watch()
    failed = None
    while (result := conn.get_result()) is not None:
        if result.status == pq.ExecStatus.FATAL_ERROR:
            failed = result
    if failed is None:
        return True
    message = (failed.error_message or b"").decode(errors="replace").strip()
    if failed.error_field(pq.DiagnosticField.SQLSTATE) == QUERY_CANCELED:
        raise psycopg.errors.QueryCanceled(message)
    raise StoreError(f"the index build failed: {message}")


def _close(session: psycopg.Connection[Any], *, left: bool) -> None:
    """Close the session; one ``left`` with a statement running is closed without cancelling it."""
    if left:
        session.pgconn.finish()
        return
    session.close()


def _sleep_until(until: float) -> bool:
    """Wait one poll, False when ``until`` comes first."""
    pause = min(POLL_SECONDS, until - time.monotonic())
    if pause <= 0:
        return False
    time.sleep(pause)
    return True
