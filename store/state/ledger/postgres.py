"""The PostgreSQL ledger: what is indexed and from which content, runs and failures, shared by all workers.

Record locks are PostgreSQL advisory locks held for a transaction, so the
ledger must live in PostgreSQL (the pgvector database by default).

Tables (``store.state.tables``; the schema is brought up to date on opening, ``store.state.database``):
``vectorsync_ledger``, ``vectorsync_runs``, ``vectorsync_run_batches`` and
``vectorsync_failures``. A run's progress is the sum over its batches, each
batch counted once by its primary key, so a batch redelivered after a worker
died is not counted twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from store.errors import ConfigError
from store.settings import NetworkSettings
from store.state.database import StateDatabase
from store.state.generations.postgres import PostgresGenerations
from store.state.ledger.base import (
    MAX_ERROR_CHARS,
    MAX_OPEN_RUNS,
    Failure,
    Forgotten,
    LedgerEntry,
    Overview,
    RunProgress,
    RunStatus,
    now,
    one_run,
    unknown_run,
)
from store.state.ledger.rules import status_when_counted
from store.state.tables import failures, ledger, run_batches, runs
from store.vectors.records import escape_unstorable

__all__ = ["PostgresLedger"]


def _entry(row: sa.Row) -> LedgerEntry:
    return LedgerEntry(row.record_id, row.content_hash, row.model, row.chunks, row.version, row.stamp)


#: Takes the write lock of each record id in ``ids`` (a sorted array), one statement for all of them; and the
#: ledger rows of ``ids``, read by the statement after the locks: a statement sees what was committed when
#: it started, so rows read by the locking statement itself could be older than the lock's last holder left
#: them (READ COMMITTED takes its snapshot before the first lock is granted). Sent in the same round trip.
_LOCK_SQL = ("SELECT count(pg_advisory_xact_lock(hashtextextended(%(collection)s || '/' || id, 0))) "
             "FROM unnest(%(ids)s::text[]) AS id")
_READ_SQL = ("SELECT record_id, content_hash, model, chunks, version, stamp FROM vectorsync_ledger "
             "WHERE collection = %(collection)s AND record_id = ANY(%(ids)s::text[])")
#: A run's batch counted once; the run's row locked; its batches counted (``_finish_if_complete``).
_COUNT_BATCH = ("INSERT INTO vectorsync_run_batches (run_id, batch, done, skipped, failed) "
                "VALUES (%(run_id)s, %(batch)s, %(done)s, %(skipped)s, %(failed)s) ON CONFLICT DO NOTHING")
_LOCK_RUN = "SELECT status, batches, deferred_index FROM vectorsync_runs WHERE run_id = %(run_id)s FOR UPDATE"
_COUNTED = "SELECT count(*) FROM vectorsync_run_batches WHERE run_id = %(run_id)s"
#: Every entry of a batch in one statement over arrays: the rows upserted (a version never goes back) and the
#: records' failures cleared, whatever the batch's size (one cached statement, not a VALUES list per size).
_RECORD_INDEXED = sa.text("""
WITH rows AS (
    SELECT * FROM unnest(CAST(:ids AS text[]), CAST(:hashes AS text[]), CAST(:models AS text[]),
                         CAST(:chunks AS integer[]), CAST(:versions AS bigint[]), CAST(:stamps AS text[]))
        AS r(record_id, content_hash, model, chunks, version, stamp)
), cleared AS (
    DELETE FROM vectorsync_failures AS f USING rows
    WHERE f.collection = :collection AND f.record_id = rows.record_id
)
INSERT INTO vectorsync_ledger (collection, record_id, content_hash, model, chunks, version, stamp, indexed_at)
SELECT :collection, record_id, content_hash, model, chunks, version, stamp, :at FROM rows
ON CONFLICT (collection, record_id) DO UPDATE SET
    content_hash = excluded.content_hash, model = excluded.model, chunks = excluded.chunks,
    stamp = excluded.stamp, indexed_at = excluded.indexed_at,
    version = greatest(vectorsync_ledger.version, excluded.version)
""")


class _Held:
    """The ledger inside a transaction that holds some records' locks."""

    def __init__(self, ledger: PostgresLedger, collection: str, conn: sa.Connection,
                 read: dict[str, LedgerEntry] | None = None, locked: frozenset[str] = frozenset()) -> None:
        self._ledger, self._collection, self._conn = ledger, collection, conn
        self._read, self._locked = read, locked

    def entries(self, record_ids: Sequence[str]) -> dict[str, LedgerEntry]:
        if self._read is not None and self._locked.issuperset(record_ids):  # read with the locks, and still so
            return {i: self._read[i] for i in record_ids if i in self._read}
        return self._ledger._entries(self._conn, self._collection, record_ids)

    def record_indexed(self, entries: Sequence[LedgerEntry]) -> None:
        self._read = None  # this block's own writes: read again from here on
        self._ledger._indexed(self._conn, self._collection, entries)

    def forget(self, record_ids: Sequence[str]) -> None:
        self._read = None
        for table in (ledger, failures):
            self._conn.execute(sa.delete(table).where(table.c.collection == self._collection,
                                                      table.c.record_id.in_(list(record_ids))))


class PostgresLedger:
    """The ledger in PostgreSQL; see the module docstring."""

    def __init__(self, url: str | None, *, network: NetworkSettings | None = None) -> None:
        """Raises ConfigError (no URL, not PostgreSQL, a schema newer than this vectorsync) and StoreUnavailable.
        ``network``: how its connections notice a silent server (None: the defaults)."""
        self.database = StateDatabase.open(url, pool_size=5, network=network)
        self.engine = self.database.engine
        self.safe_url = self.database.safe_url

    @cached_property
    def generations(self) -> PostgresGenerations:
        """The aliases of migrated collections, in this database and over its engine."""
        return PostgresGenerations(database=self.database)

    def close(self) -> None:
        self.database.close()

    @contextmanager
    def transaction(self) -> Iterator[sa.Connection]:
        """A connection in a transaction; driver errors become StoreUnavailable or StoreError."""
        with self.database.transaction() as conn:
            yield conn

    # -- locks and entries -----------------------------------------------------------

    @contextmanager
    def locked(self, collection: str, record_ids: Iterable[str], *, read: bool = False) -> Iterator[_Held]:
        """Hold the write locks of these records until the block ends (sorted: no deadlocks); ``read``: their
        ledger rows come back in the same round trip as the locks (``Held.entries`` then asks nothing)."""
        ids = sorted(set(record_ids))
        with self.transaction() as conn:
            rows = self._lock(conn, collection, ids, read=read) if ids else ({} if read else None)
            yield _Held(self, collection, conn, rows, frozenset(ids))

    def _lock(self, conn: sa.Connection, collection: str, ids: list[str], *,
              read: bool) -> dict[str, LedgerEntry] | None:
        """One statement for every lock, taken in the ids' order (unnest keeps the array's), pipelined with the
        transaction's BEGIN; with ``read``, the rows' statement follows in the same pipeline: BEGIN, the locks
        and the rows cost one round trip between them."""
        params = {"collection": collection, "ids": ids}
        raw = conn.connection.driver_connection
        with raw.cursor() as locks, raw.cursor() as rows:  # type: ignore[union-attr]
            with raw.pipeline():  # type: ignore[union-attr]
                locks.execute(_LOCK_SQL, params)
                if read:
                    rows.execute(_READ_SQL, params)
            return {row[0]: LedgerEntry(*row) for row in rows.fetchall()} if read else None

    def entries(self, collection: str, record_ids: Sequence[str]) -> dict[str, LedgerEntry]:
        with self.database.reading() as conn:
            return self._entries(conn, collection, record_ids)

    def _entries(self, conn: sa.Connection, collection: str, record_ids: Sequence[str]) -> dict[str, LedgerEntry]:
        query = sa.select(ledger).where(ledger.c.collection == collection, ledger.c.record_id.in_(list(record_ids)))
        return {row.record_id: _entry(row) for row in conn.execute(query).all()}

    def record_ids(self, collection: str) -> set[str]:
        with self.transaction() as conn:
            return set(conn.execute(sa.select(ledger.c.record_id).where(ledger.c.collection == collection)).scalars())

    def _indexed(self, conn: sa.Connection, collection: str, entries: Sequence[LedgerEntry]) -> None:
        if not entries:
            return
        conn.execute(_RECORD_INDEXED, {
            "collection": collection, "at": now(), "ids": [e.record_id for e in entries],
            "hashes": [e.content_hash for e in entries], "models": [e.model for e in entries],
            "chunks": [e.chunks for e in entries], "versions": [e.version for e in entries],
            "stamps": [e.stamp for e in entries]})

    def models(self, collection: str) -> set[str]:
        with self.transaction() as conn:
            return set(conn.scalars(sa.select(ledger.c.model).where(ledger.c.collection == collection).distinct()))

    def forget_collection(self, collection: str) -> Forgotten:
        with self.transaction() as conn:
            counts = [conn.execute(sa.delete(table).where(table.c.collection == collection)).rowcount
                      for table in (ledger, failures)]
        return Forgotten(*counts)

    # -- runs ------------------------------------------------------------------------

    def create_run(self, collection: str, *, full: bool = False, run_id: str | None = None,
                   kind: str = "reindex") -> str:
        """Insert a running run (idempotent for a given run_id) and return its id; kind: reindex or reconcile."""
        run_id = run_id or uuid.uuid4().hex
        insert = postgresql.insert(runs).values(
            run_id=run_id, collection=collection, status=RunStatus.RUNNING.value, full=full, started_at=now(),
            kind=kind,
        )
        with self.transaction() as conn:
            conn.execute(insert.on_conflict_do_nothing(index_elements=["run_id"]))
        return run_id

    def set_run_total(self, run_id: str, *, total: int, batches: int) -> RunProgress:
        with self.transaction() as conn:
            conn.execute(sa.update(runs).where(runs.c.run_id == run_id).values(total=total, batches=batches))
            return self._finish_if_complete(conn, run_id)

    def finish_batch(self, run_id: str, batch: int, *, done: int, skipped: int, failed: int) -> RunProgress:
        """Count one batch of a run, once, and mark the run done when its last batch is in: one transaction,
        whose BEGIN, count, lock and reads go in one round trip (``_finish_if_complete``)."""
        counted = {"run_id": run_id, "batch": batch, "done": done, "skipped": skipped, "failed": failed}
        with self.transaction() as conn:
            return self._finish_if_complete(conn, run_id, counted)

    def _finish_if_complete(self, conn: sa.Connection, run_id: str,
                            counted: dict[str, object] | None = None) -> RunProgress:
        """The run's progress, its row locked while its batches are counted, so exactly one caller ends it;
        ``counted``: a batch to count first. The statements are pipelined, each its own: the count comes after
        the lock, because a statement sees only what was committed when it began, and the batch counted by
        the lock's last holder must be seen."""
        raw = conn.connection.driver_connection
        with raw.cursor() as insert, raw.cursor() as locked, raw.cursor() as total:  # type: ignore[union-attr]
            with raw.pipeline():  # type: ignore[union-attr]
                if counted is not None:
                    insert.execute(_COUNT_BATCH, counted)
                locked.execute(_LOCK_RUN, {"run_id": run_id})
                total.execute(_COUNTED, {"run_id": run_id})
            row, batches = locked.fetchone(), total.fetchone()
        if row is None:
            raise ConfigError(unknown_run(run_id))
        status, expected, deferred = row
        moved = status_when_counted(RunStatus(status), expected=expected, counted=batches[0] if batches else 0,
                                    deferred=bool(deferred))
        if moved is not None:
            ended = {"finished_at": now()} if moved.ended else {}
            conn.execute(sa.update(runs).where(runs.c.run_id == run_id).values(status=moved.value, **ended))
        return self._run(conn, run_id)

    def defer_index(self, run_id: str) -> None:
        with self.transaction() as conn:
            conn.execute(sa.update(runs).where(runs.c.run_id == run_id).values(deferred_index=True))

    def complete_run(self, run_id: str) -> RunProgress:
        with self.transaction() as conn:
            conn.execute(sa.update(runs).where(runs.c.run_id == run_id, runs.c.status == RunStatus.INDEXING.value)
                         .values(status=RunStatus.DONE.value, finished_at=now()))
            return self._run(conn, run_id)

    def fail_run(self, run_id: str, error: str) -> None:
        with self.transaction() as conn:
            conn.execute(sa.update(runs).where(runs.c.run_id == run_id).values(
                status=RunStatus.FAILED.value, error=error[:MAX_ERROR_CHARS], finished_at=now()))

    def run(self, run_id: str) -> RunProgress:
        """A run's progress. Raises ConfigError for an unknown run."""
        with self.database.reading() as conn:
            return self._run(conn, run_id)

    def _run(self, conn: sa.Connection, run_id: str) -> RunProgress:
        """The run's row and its batches' sums in one statement."""
        sums = sa.select(
            sa.func.coalesce(sa.func.sum(run_batches.c.done), 0).label("done"),
            sa.func.coalesce(sa.func.sum(run_batches.c.skipped), 0).label("skipped"),
            sa.func.coalesce(sa.func.sum(run_batches.c.failed), 0).label("failed"),
            sa.func.max(run_batches.c.counted_at).label("moved_at"),
            sa.func.count().label("counted"),
        ).where(run_batches.c.run_id == run_id).subquery()
        row = conn.execute(sa.select(runs, sums).select_from(runs.join(sums, sa.true()))
                           .where(runs.c.run_id == run_id)).one_or_none()
        if row is None:
            raise ConfigError(unknown_run(run_id))
        return RunProgress(run_id=row.run_id, collection=row.collection, status=RunStatus(row.status),
                           total=row.total, done=int(row.done), skipped=int(row.skipped), failed=int(row.failed),
                           full=row.full, started_at=row.started_at, finished_at=row.finished_at, error=row.error,
                           kind=row.kind, moved_at=row.moved_at or row.started_at, batches=row.batches,
                           counted=int(row.counted))

    def resolve_run(self, prefix: str) -> str:
        with self.transaction() as conn:
            query = sa.select(runs.c.run_id).where(runs.c.run_id.startswith(prefix, autoescape=True)).limit(2)
            found = conn.execute(query).scalars().all()
        return one_run(prefix, found)

    def recent_runs(self, limit: int = 20, *, running: bool = False) -> list[RunProgress]:
        query = sa.select(runs.c.run_id).order_by(runs.c.started_at.desc()).limit(limit)
        if running:
            query = query.where(runs.c.status == RunStatus.RUNNING.value)
        with self.transaction() as conn:
            ids = conn.execute(query).scalars().all()
        return [self.run(run_id) for run_id in ids]

    # -- failures --------------------------------------------------------------------

    def record_failure(self, collection: str, record_id: str, error: str, *, run_id: str | None = None) -> None:
        # An id PostgreSQL cannot store (a NUL, a lone surrogate) is kept escaped: the failure is still told.
        record_id, error = escape_unstorable(record_id), escape_unstorable(error)
        insert = postgresql.insert(failures).values(collection=collection, record_id=record_id,
                                                    error=error[:MAX_ERROR_CHARS], attempts=1, run_id=run_id,
                                                    last_seen=now())
        upsert = insert.on_conflict_do_update(
            index_elements=["collection", "record_id"],
            set_={"error": insert.excluded.error, "run_id": insert.excluded.run_id,
                  "last_seen": insert.excluded.last_seen, "attempts": failures.c.attempts + 1},
        )
        with self.transaction() as conn:
            conn.execute(upsert)

    def failures(self, collection: str | None = None) -> list[Failure]:
        query = sa.select(failures).order_by(failures.c.collection, failures.c.record_id)
        if collection is not None:
            query = query.where(failures.c.collection == collection)
        with self.transaction() as conn:
            rows = conn.execute(query).all()
        return [Failure(r.collection, r.record_id, r.error, r.attempts, r.last_seen) for r in rows]

    def overview(self) -> Overview:
        ended = [status.value for status in RunStatus if status.ended]
        with self.transaction() as conn:
            counts: dict[str, int] = {row[0]: row[1] for row in conn.execute(
                sa.select(runs.c.status, sa.func.count()).group_by(runs.c.status))}
            open_ids = conn.execute(sa.select(runs.c.run_id).where(runs.c.status.not_in(ended))
                                    .order_by(runs.c.started_at.desc()).limit(MAX_OPEN_RUNS)).scalars().all()
            failed: dict[str, int] = {row[0]: row[1] for row in conn.execute(
                sa.select(failures.c.collection, sa.func.count()).group_by(failures.c.collection))}
        return Overview(runs={status: int(counts.get(status.value, 0)) for status in RunStatus},
                        open_runs=[self.run(run_id) for run_id in open_ids],
                        failures={str(c): int(n) for c, n in failed.items()})
