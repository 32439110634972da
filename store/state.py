"""Indexing state in SQL: the ledger (what is indexed, from which content), runs, failures.

Tables (created on first use): ``vectorsync_ledger``, ``vectorsync_runs``,
``vectorsync_run_batches`` and ``vectorsync_failures``. A run's progress is
the sum over its batches, each batch counted once by its primary key, so a
batch redelivered after a worker died is not counted twice.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from store.errors import ConfigError
from store.sql import make_engine, transaction

__all__ = ["Failure", "LedgerEntry", "RunProgress", "RunStatus", "State"]

#: Longest error text kept per failure.
MAX_ERROR_CHARS = 2000


class RunStatus(enum.StrEnum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """What the index holds for one record: the content hash it was built from."""

    record_id: str
    content_hash: str
    model: str
    chunks: int
    version: int = 0


@dataclass(frozen=True, slots=True)
class RunProgress:
    """A reindex run: how many records it has, and how many are done, skipped or failed."""

    run_id: str
    collection: str
    status: RunStatus
    total: int | None
    done: int
    skipped: int
    failed: int
    full: bool
    started_at: datetime
    finished_at: datetime | None
    error: str = ""
    kind: str = "reindex"

    @property
    def processed(self) -> int:
        return self.done + self.skipped + self.failed


@dataclass(frozen=True, slots=True)
class Failure:
    """A record that could not be indexed after its retries."""

    collection: str
    record_id: str
    error: str
    attempts: int
    last_seen: datetime


_meta = sa.MetaData()
ledger = sa.Table(
    "vectorsync_ledger", _meta,
    sa.Column("collection", sa.Text, primary_key=True),
    sa.Column("record_id", sa.Text, primary_key=True),
    sa.Column("content_hash", sa.Text, nullable=False),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("chunks", sa.Integer, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("indexed_at", sa.DateTime(timezone=True), nullable=False),
)
runs = sa.Table(
    "vectorsync_runs", _meta,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("collection", sa.Text, nullable=False, index=True),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("kind", sa.Text, nullable=False, server_default="reindex"),
    sa.Column("full", sa.Boolean, nullable=False),
    sa.Column("total", sa.Integer),
    sa.Column("batches", sa.Integer),
    sa.Column("error", sa.Text, nullable=False, server_default=""),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("finished_at", sa.DateTime(timezone=True)),
)
run_batches = sa.Table(
    "vectorsync_run_batches", _meta,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("batch", sa.Integer, primary_key=True),
    sa.Column("done", sa.Integer, nullable=False),
    sa.Column("skipped", sa.Integer, nullable=False),
    sa.Column("failed", sa.Integer, nullable=False),
)
failures = sa.Table(
    "vectorsync_failures", _meta,
    sa.Column("collection", sa.Text, primary_key=True),
    sa.Column("record_id", sa.Text, primary_key=True),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("run_id", sa.Text),
    sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
)


def _now() -> datetime:
    return datetime.now(UTC)


class State:
    """The state database (PostgreSQL; the pgvector database by default)."""

    def __init__(self, url: str | None) -> None:
        if not url:
            raise ConfigError(
                "no state database: set state.url (VECTORSYNC_STATE__URL) to a PostgreSQL URL, "
                "or use the pgvector store, whose database is the default"
            )
        self.engine = make_engine(url, setting="state.url", pool_size=5, pool_pre_ping=True)
        self.safe_url = self.engine.url.render_as_string(hide_password=True)
        if self.engine.dialect.name != "postgresql":
            raise ConfigError(f"state.url {self.safe_url!r} is not PostgreSQL; the state needs PostgreSQL locks")
        self._create()

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def transaction(self) -> Iterator[sa.Connection]:
        """A connection in a transaction; driver errors become StoreUnavailable or StoreError."""
        with transaction(self.engine, f"state database {self.safe_url}") as conn:
            yield conn

    def _create(self) -> None:
        with self.transaction() as conn:
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(sa.func.hashtextextended("vectorsync:state", 0))))
            _meta.create_all(conn, checkfirst=True)

    # -- locks -----------------------------------------------------------------------

    @contextmanager
    def locked(self, collection: str, record_ids: Iterable[str]) -> Iterator[sa.Connection]:
        """Hold the write locks of these records until the block ends (sorted: no deadlocks)."""
        with self.transaction() as conn:
            for record_id in sorted(set(record_ids)):
                key = sa.func.hashtextextended(f"{collection}/{record_id}", 0)
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(key)))
            yield conn

    # -- ledger ----------------------------------------------------------------------

    def ledger(
        self, collection: str, record_ids: Sequence[str], conn: sa.Connection | None = None
    ) -> dict[str, LedgerEntry]:
        """The ledger entries of these records that exist."""
        query = sa.select(ledger).where(ledger.c.collection == collection, ledger.c.record_id.in_(list(record_ids)))
        with self._conn(conn) as c:
            rows = c.execute(query).all()
        return {r.record_id: LedgerEntry(r.record_id, r.content_hash, r.model, r.chunks, r.version) for r in rows}

    def ledger_ids(self, collection: str) -> set[str]:
        with self.transaction() as conn:
            return set(conn.execute(sa.select(ledger.c.record_id).where(ledger.c.collection == collection)).scalars())

    def ledger_page(self, collection: str, *, after: str | None, limit: int) -> list[LedgerEntry]:
        """Ledger entries in record-id order after ``after``: for reconcile sweeps."""
        query = sa.select(ledger).where(ledger.c.collection == collection)
        if after is not None:
            query = query.where(ledger.c.record_id > after)
        with self.transaction() as conn:
            rows = conn.execute(query.order_by(ledger.c.record_id).limit(limit)).all()
        return [LedgerEntry(r.record_id, r.content_hash, r.model, r.chunks, r.version) for r in rows]

    def record_indexed(
        self, collection: str, entries: Sequence[LedgerEntry], conn: sa.Connection | None = None
    ) -> None:
        if not entries:
            return
        rows = [{"collection": collection, "record_id": e.record_id, "content_hash": e.content_hash,
                 "model": e.model, "chunks": e.chunks, "version": e.version, "indexed_at": _now()} for e in entries]
        insert = postgresql.insert(ledger).values(rows)
        upsert = insert.on_conflict_do_update(
            index_elements=["collection", "record_id"],
            set_={**{c: insert.excluded[c] for c in ("content_hash", "model", "chunks", "indexed_at")},
                  # pushed documents: a version never goes back (a late older push stays dropped)
                  "version": sa.func.greatest(ledger.c.version, insert.excluded.version)},
        )
        with self._conn(conn) as c:
            c.execute(upsert)
            c.execute(sa.delete(failures).where(failures.c.collection == collection,
                                                failures.c.record_id.in_([e.record_id for e in entries])))

    def forget(self, collection: str, record_ids: Sequence[str], conn: sa.Connection | None = None) -> None:
        """Drop ledger rows and failures of records that no longer exist."""
        with self._conn(conn) as c:
            for table in (ledger, failures):
                c.execute(sa.delete(table).where(table.c.collection == collection,
                                                 table.c.record_id.in_(list(record_ids))))

    def forget_collection(self, collection: str) -> None:
        with self.transaction() as conn:
            for table in (ledger, failures):
                conn.execute(sa.delete(table).where(table.c.collection == collection))

    # -- runs ------------------------------------------------------------------------

    def create_run(self, collection: str, *, full: bool = False, run_id: str | None = None,
                   kind: str = "reindex") -> str:
        """Insert a running run (idempotent for a given run_id) and return its id; kind: reindex or reconcile."""
        run_id = run_id or uuid.uuid4().hex
        insert = postgresql.insert(runs).values(
            run_id=run_id, collection=collection, status=RunStatus.RUNNING.value, full=full, started_at=_now(),
            kind=kind,
        )
        with self.transaction() as conn:
            conn.execute(insert.on_conflict_do_nothing(index_elements=["run_id"]))
        return run_id

    def set_run_total(self, run_id: str, *, total: int, batches: int) -> RunProgress:
        with self.transaction() as conn:
            conn.execute(sa.update(runs).where(runs.c.run_id == run_id).values(total=total, batches=batches))
        return self.finish_if_complete(run_id)

    def finish_batch(self, run_id: str, batch: int, *, done: int, skipped: int, failed: int) -> RunProgress:
        """Count one batch of a run, once, and mark the run done when its last batch is in."""
        insert = postgresql.insert(run_batches).values(run_id=run_id, batch=batch, done=done, skipped=skipped,
                                                       failed=failed)
        with self.transaction() as conn:
            conn.execute(insert.on_conflict_do_nothing(index_elements=["run_id", "batch"]))
        return self.finish_if_complete(run_id)

    def finish_if_complete(self, run_id: str) -> RunProgress:
        with self.transaction() as conn:
            row = conn.execute(sa.select(runs).where(runs.c.run_id == run_id).with_for_update()).one_or_none()
            if row is None:
                raise ConfigError(f"no reindex run {run_id!r}: `vectorsync status` lists the runs")
            counted = conn.execute(sa.select(sa.func.count()).where(run_batches.c.run_id == run_id)).scalar_one()
            if row.status == RunStatus.RUNNING and row.batches is not None and counted >= row.batches:
                conn.execute(sa.update(runs).where(runs.c.run_id == run_id)
                             .values(status=RunStatus.DONE.value, finished_at=_now()))
        return self.run(run_id)

    def fail_run(self, run_id: str, error: str) -> None:
        with self.transaction() as conn:
            conn.execute(sa.update(runs).where(runs.c.run_id == run_id).values(
                status=RunStatus.FAILED.value, error=error[:MAX_ERROR_CHARS], finished_at=_now()))

    def run(self, run_id: str) -> RunProgress:
        """A run's progress. Raises ConfigError for an unknown run."""
        with self.transaction() as conn:
            row = conn.execute(sa.select(runs).where(runs.c.run_id == run_id)).one_or_none()
            if row is None:
                raise ConfigError(f"no reindex run {run_id!r}: `vectorsync status` lists the runs")
            sums = conn.execute(sa.select(
                sa.func.coalesce(sa.func.sum(run_batches.c.done), 0),
                sa.func.coalesce(sa.func.sum(run_batches.c.skipped), 0),
                sa.func.coalesce(sa.func.sum(run_batches.c.failed), 0),
            ).where(run_batches.c.run_id == run_id)).one()
        return RunProgress(run_id=row.run_id, collection=row.collection, status=RunStatus(row.status),
                           total=row.total, done=int(sums[0]), skipped=int(sums[1]), failed=int(sums[2]),
                           full=row.full, started_at=row.started_at, finished_at=row.finished_at, error=row.error,
                           kind=row.kind)

    def recent_runs(self, limit: int = 20) -> list[RunProgress]:
        with self.transaction() as conn:
            ids = conn.execute(sa.select(runs.c.run_id).order_by(runs.c.started_at.desc()).limit(limit)).scalars().all()
        return [self.run(run_id) for run_id in ids]

    # -- failures --------------------------------------------------------------------

    def record_failure(self, collection: str, record_id: str, error: str, *, run_id: str | None = None) -> None:
        insert = postgresql.insert(failures).values(collection=collection, record_id=record_id,
                                                    error=error[:MAX_ERROR_CHARS], attempts=1, run_id=run_id,
                                                    last_seen=_now())
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

    @contextmanager
    def _conn(self, conn: sa.Connection | None) -> Iterator[sa.Connection]:
        if conn is not None:
            yield conn
        else:
            with self.transaction() as fresh:
                yield fresh
