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
from store.state.tables import failures, ledger, run_batches, runs
from store.vectors.records import escape_unstorable

__all__ = ["PostgresLedger"]


def _entry(row: sa.Row) -> LedgerEntry:  # type: ignore[type-arg]
    return LedgerEntry(row.record_id, row.content_hash, row.model, row.chunks, row.version, row.stamp)


#: Takes the write lock of each record id in ``ids`` (a sorted array), one statement for all of them.
_LOCK_RECORDS = sa.text(
    "SELECT count(pg_advisory_xact_lock(hashtextextended(:collection || '/' || id, 0))) "
    "FROM unnest(CAST(:ids AS text[])) AS id"
)


class _Held:
    """The ledger inside a transaction that holds some records' locks."""

    def __init__(self, ledger: PostgresLedger, collection: str, conn: sa.Connection) -> None:
        self._ledger, self._collection, self._conn = ledger, collection, conn

    def entries(self, record_ids: Sequence[str]) -> dict[str, LedgerEntry]:
        return self._ledger._entries(self._conn, self._collection, record_ids)

    def record_indexed(self, entries: Sequence[LedgerEntry]) -> None:
        self._ledger._indexed(self._conn, self._collection, entries)

    def forget(self, record_ids: Sequence[str]) -> None:
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
    def locked(self, collection: str, record_ids: Iterable[str]) -> Iterator[_Held]:
        """Hold the write locks of these records until the block ends (sorted: no deadlocks)."""
        ids = sorted(set(record_ids))
        with self.transaction() as conn:
            if ids:  # one statement for every lock, taken in the ids' order (unnest keeps the array's)
                conn.execute(_LOCK_RECORDS, {"collection": collection, "ids": ids})
            yield _Held(self, collection, conn)

    def entries(self, collection: str, record_ids: Sequence[str]) -> dict[str, LedgerEntry]:
        with self.transaction() as conn:
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
        rows = [{"collection": collection, "record_id": e.record_id, "content_hash": e.content_hash,
                 "model": e.model, "chunks": e.chunks, "version": e.version, "stamp": e.stamp,
                 "indexed_at": now()} for e in entries]
        insert = postgresql.insert(ledger).values(rows)
        upsert = insert.on_conflict_do_update(
            index_elements=["collection", "record_id"],
            set_={**{c: insert.excluded[c] for c in ("content_hash", "model", "chunks", "stamp", "indexed_at")},
                  # pushed documents: a version never goes back (a late older push stays dropped)
                  "version": sa.func.greatest(ledger.c.version, insert.excluded.version)},
        )
        conn.execute(upsert)
        conn.execute(sa.delete(failures).where(failures.c.collection == collection,
                                               failures.c.record_id.in_([e.record_id for e in entries])))

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
        return self._finish_if_complete(run_id)

    def finish_batch(self, run_id: str, batch: int, *, done: int, skipped: int, failed: int) -> RunProgress:
        """Count one batch of a run, once, and mark the run done when its last batch is in."""
        insert = postgresql.insert(run_batches).values(run_id=run_id, batch=batch, done=done, skipped=skipped,
                                                       failed=failed)
        with self.transaction() as conn:
            conn.execute(insert.on_conflict_do_nothing(index_elements=["run_id", "batch"]))
        return self._finish_if_complete(run_id)

    def _finish_if_complete(self, run_id: str) -> RunProgress:
        with self.transaction() as conn:
            row = conn.execute(sa.select(runs).where(runs.c.run_id == run_id).with_for_update()).one_or_none()
            if row is None:
                raise ConfigError(unknown_run(run_id))
            counted = conn.execute(sa.select(sa.func.count()).where(run_batches.c.run_id == run_id)).scalar_one()
            if row.status == RunStatus.RUNNING and row.batches is not None and counted >= row.batches:
                ended = {"status": RunStatus.INDEXING.value} if row.deferred_index else \
                    {"status": RunStatus.DONE.value, "finished_at": now()}
                conn.execute(sa.update(runs).where(runs.c.run_id == run_id).values(**ended))
        return self.run(run_id)

    def defer_index(self, run_id: str) -> None:
        with self.transaction() as conn:
            conn.execute(sa.update(runs).where(runs.c.run_id == run_id).values(deferred_index=True))

    def complete_run(self, run_id: str) -> RunProgress:
        with self.transaction() as conn:
            conn.execute(sa.update(runs).where(runs.c.run_id == run_id, runs.c.status == RunStatus.INDEXING.value)
                         .values(status=RunStatus.DONE.value, finished_at=now()))
        return self.run(run_id)

    def fail_run(self, run_id: str, error: str) -> None:
        with self.transaction() as conn:
            conn.execute(sa.update(runs).where(runs.c.run_id == run_id).values(
                status=RunStatus.FAILED.value, error=error[:MAX_ERROR_CHARS], finished_at=now()))

    def run(self, run_id: str) -> RunProgress:
        """A run's progress. Raises ConfigError for an unknown run."""
        with self.transaction() as conn:
            row = conn.execute(sa.select(runs).where(runs.c.run_id == run_id)).one_or_none()
            if row is None:
                raise ConfigError(unknown_run(run_id))
            sums = conn.execute(sa.select(
                sa.func.coalesce(sa.func.sum(run_batches.c.done), 0),
                sa.func.coalesce(sa.func.sum(run_batches.c.skipped), 0),
                sa.func.coalesce(sa.func.sum(run_batches.c.failed), 0),
                sa.func.max(run_batches.c.counted_at),
            ).where(run_batches.c.run_id == run_id)).one()
        return RunProgress(run_id=row.run_id, collection=row.collection, status=RunStatus(row.status),
                           total=row.total, done=int(sums[0]), skipped=int(sums[1]), failed=int(sums[2]),
                           full=row.full, started_at=row.started_at, finished_at=row.finished_at, error=row.error,
                           kind=row.kind, moved_at=sums[3] or row.started_at)

    def resolve_run(self, prefix: str) -> str:
        with self.transaction() as conn:
            query = sa.select(runs.c.run_id).where(runs.c.run_id.startswith(prefix, autoescape=True)).limit(2)
            found = conn.execute(query).scalars().all()
        return one_run(prefix, found)

    def recent_runs(self, limit: int = 20) -> list[RunProgress]:
        with self.transaction() as conn:
            ids = conn.execute(sa.select(runs.c.run_id).order_by(runs.c.started_at.desc()).limit(limit)).scalars().all()
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
