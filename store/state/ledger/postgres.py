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

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property

import sqlalchemy as sa

import store.state.ledger.rules as rules
import store.state.ledger.statements as sql
from store.calls.spend import Spend
from store.connect.postgres import driver
from store.errors import ConfigError
from store.settings import NetworkSettings
from store.state.clock import now
from store.state.database import StateDatabase
from store.state.generations.postgres import PostgresGenerations
from store.state.ledger.base import Failure, Forgotten, LedgerEntry, Overview, Parked, RunProgress, RunStatus
from store.state.ledger.rows import entry_of, failure_of, parked_of, parked_row, progress_of, spend_of, spend_row
from store.vectors.records import escape_unstorable, has_unstorable

__all__ = ["PostgresLedger"]


class _Held:
    """The ledger inside a transaction that holds some records' locks."""

    def __init__(
        self,
        ledger: PostgresLedger,
        collection: str,
        conn: sa.Connection,
        read: dict[str, LedgerEntry] | None = None,
        locked: frozenset[str] = frozenset(),
    ) -> None:
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
        for statement in sql.FORGET:
            self._conn.execute(statement, {"collection": self._collection, "ids": list(record_ids)})


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
            held = self._lock(conn, collection, ids, read=read) if ids else ({} if read else None)
            yield _Held(self, collection, conn, held, frozenset(ids))

    def _lock(
        self, conn: sa.Connection, collection: str, ids: list[str], *, read: bool
    ) -> dict[str, LedgerEntry] | None:
        """One statement for every lock, taken in the ids' order (unnest keeps the array's), pipelined with the
        transaction's BEGIN; with ``read``, the rows' statement follows in the same pipeline: BEGIN, the locks
        and the rows cost one round trip between them."""
        params = {"collection": collection, "ids": ids}
        raw = driver(conn)
        with raw.cursor() as locks, raw.cursor() as found:
            with raw.pipeline():
                locks.execute(sql.LOCK_RECORDS, params)
                if read:
                    found.execute(sql.READ_LOCKED, params)
            return {row[0]: LedgerEntry(*row) for row in found.fetchall()} if read else None

    def entries(self, collection: str, record_ids: Sequence[str]) -> dict[str, LedgerEntry]:
        with self.database.reading() as conn:
            return self._entries(conn, collection, record_ids)

    def _entries(self, conn: sa.Connection, collection: str, record_ids: Sequence[str]) -> dict[str, LedgerEntry]:
        # An id PostgreSQL cannot hold (a NUL, a lone surrogate) has no entry, and would fail the statement for
        # every other id: it is left out (a caller that did not check ids, ``reindex --plan``'s reader, is told
        # the truth; the record's batch refuses it and records why).
        ids = [record_id for record_id in record_ids if not has_unstorable(record_id)]
        if not ids:
            return {}
        found = conn.execute(sql.ENTRIES, {"collection": collection, "ids": ids}).all()
        return {row.record_id: entry_of(row) for row in found}

    def record_ids(self, collection: str) -> set[str]:
        with self.transaction() as conn:
            return set(conn.scalars(sql.RECORD_IDS, {"collection": collection}))

    def entries_page(self, collection: str, *, after: str | None, limit: int) -> list[LedgerEntry]:
        statement = sql.ENTRIES_PAGE if after is None else sql.ENTRIES_AFTER
        with self.database.reading() as conn:
            found = conn.execute(statement, {"collection": collection, "limit": limit, "after": after}).all()
            return [entry_of(row) for row in found]

    def _indexed(self, conn: sa.Connection, collection: str, entries: Sequence[LedgerEntry]) -> None:
        if not entries:
            return
        conn.execute(
            sql.RECORD_INDEXED,
            {
                "collection": collection,
                "at": now(),
                "ids": [e.record_id for e in entries],
                "hashes": [e.content_hash for e in entries],
                "models": [e.model for e in entries],
                "chunks": [e.chunks for e in entries],
                "versions": [e.version for e in entries],
                "stamps": [e.stamp for e in entries],
            },
        )

    def models(self, collection: str) -> set[str]:
        with self.transaction() as conn:
            return set(conn.scalars(sql.MODELS, {"collection": collection}))

    def forget_collection(self, collection: str) -> Forgotten:
        with self.transaction() as conn:
            counts = [
                conn.execute(statement, {"collection": collection}).rowcount for statement in sql.FORGET_COLLECTION
            ]
        return Forgotten(*counts)

    # -- runs ------------------------------------------------------------------------

    def create_run(
        self, collection: str, *, full: bool = False, run_id: str | None = None, kind: str = "reindex"
    ) -> str:
        """Insert a running run (idempotent for a given run_id) and return its id; kind: reindex or reconcile."""
        run = rules.started_run(collection, run_id=run_id, full=full, kind=kind, at=now())
        with self.transaction() as conn:
            conn.execute(
                sql.CREATE_RUN,
                {
                    "run_id": run.run_id,
                    "collection": run.collection,
                    "status": run.status.value,
                    "full": run.full,
                    "started_at": run.started_at,
                    "kind": run.kind,
                },
            )
        return run.run_id

    def set_run_total(self, run_id: str, *, total: int, batches: int) -> RunProgress:
        with self.transaction() as conn:
            conn.execute(sql.SET_RUN_TOTAL, {"run": run_id, "total": total, "batches": batches})
            return self._finish_if_complete(conn, run_id)

    def finish_batch(self, run_id: str, batch: int, *, done: int, skipped: int, failed: int) -> RunProgress:
        """Count one batch of a run, once, and mark the run done when its last batch is in: one transaction,
        whose BEGIN, count, lock and reads go in one round trip (``_finish_if_complete``)."""
        counted = {"run_id": run_id, "batch": batch, "done": done, "skipped": skipped, "failed": failed}
        with self.transaction() as conn:
            return self._finish_if_complete(conn, run_id, counted)

    def _finish_if_complete(
        self, conn: sa.Connection, run_id: str, counted: dict[str, object] | None = None
    ) -> RunProgress:
        """The run's progress, its row locked while its batches are counted, so exactly one caller ends it;
        ``counted``: a batch to count first. The statements are pipelined, each its own: the count comes after
        the lock, because a statement sees only what was committed when it began, and the batch counted by
        the lock's last holder must be seen."""
        raw = driver(conn)
        with raw.cursor() as insert, raw.cursor() as locked, raw.cursor() as total:
            with raw.pipeline():
                if counted is not None:
                    insert.execute(sql.COUNT_BATCH, counted)
                locked.execute(sql.LOCK_RUN, {"run_id": run_id})
                total.execute(sql.COUNTED_BATCHES, {"run_id": run_id})
            row, batches = locked.fetchone(), total.fetchone()
        if row is None:
            raise ConfigError(rules.unknown_run(run_id))
        status, expected, deferred = row
        self._move(
            conn,
            run_id,
            rules.status_when_counted(
                RunStatus(status), expected=expected, counted=batches[0] if batches else 0, deferred=bool(deferred)
            ),
        )
        return self._run(conn, run_id)

    @staticmethod
    def _move(conn: sa.Connection, run_id: str, status: RunStatus | None) -> None:
        """The run in ``status`` (None: as it is), finished now if that ends it."""
        if status is not None:
            conn.execute(
                sql.MOVE_RUN, {"run": run_id, "status": status.value, "finished_at": rules.ended_at(status, now())}
            )

    def defer_index(self, run_id: str) -> None:
        with self.transaction() as conn:
            conn.execute(sql.DEFER_INDEX, {"run": run_id})

    def complete_run(self, run_id: str) -> RunProgress:
        """An ``indexing`` run whose index is built is ``done``: its row locked while that is decided."""
        with self.transaction() as conn:
            row = conn.exec_driver_sql(sql.LOCK_RUN, {"run_id": run_id}).first()
            if row is not None:
                self._move(conn, run_id, rules.status_when_index_built(RunStatus(row.status)))
            return self._run(conn, run_id)

    def fail_run(self, run_id: str, error: str) -> None:
        with self.transaction() as conn:
            conn.execute(
                sql.FAIL_RUN, {"run": run_id, "error": rules.kept_error(escape_unstorable(error)), "finished_at": now()}
            )

    def run(self, run_id: str) -> RunProgress:
        """A run's progress. Raises ConfigError for an unknown run."""
        with self.database.reading() as conn:
            return self._run(conn, run_id)

    def _run(self, conn: sa.Connection, run_id: str) -> RunProgress:
        """The run's row and its batches' sums in one statement."""
        row = conn.execute(sql.RUN, {"run": run_id}).one_or_none()
        if row is None:
            raise ConfigError(rules.unknown_run(run_id))
        return progress_of(row)

    def resolve_run(self, prefix: str) -> str:
        with self.transaction() as conn:
            found = conn.scalars(sql.RUNS_STARTING, {"pattern": sql.prefix_pattern(prefix)}).all()
        return rules.one_run(prefix, found)

    def recent_runs(self, limit: int = 20, *, running: bool = False) -> list[RunProgress]:
        query, params = (sql.RUNS_IN_STATUS, {"status": RunStatus.RUNNING.value}) if running else (sql.RECENT_RUNS, {})
        with self.transaction() as conn:
            ids = conn.scalars(query, {**params, "limit": limit}).all()
        return [self.run(run_id) for run_id in ids]

    # -- budgets ---------------------------------------------------------------------

    def set_caps(self, run_id: str, *, max_tokens: int | None, max_cost: float | None) -> None:
        with self.transaction() as conn:
            if conn.execute(sql.SET_CAPS, {"run": run_id, "max_tokens": max_tokens, "max_cost": max_cost}).rowcount:
                return
        raise ConfigError(rules.unknown_run(run_id))

    def set_lane(self, run_id: str, lane: str) -> None:
        with self.transaction() as conn:
            if conn.execute(sql.SET_LANE, {"run": run_id, "lane": lane}).rowcount:
                return
        raise ConfigError(rules.unknown_run(run_id))

    def pause_run(self, parked: Parked, error: str) -> bool:
        with self.transaction() as conn:
            if not rules.may_pause(self._locked_status(conn, parked.run_id)):
                return False
            conn.execute(sql.PAUSE_RUN, {"run": parked.run_id, "error": rules.kept_error(escape_unstorable(error))})
            conn.execute(sql.PARK_BATCH, parked_row(parked))
            return True

    def park_batch(self, parked: Parked) -> bool:
        with self.transaction() as conn:
            if self._locked_status(conn, parked.run_id) != RunStatus.PAUSED:
                return False
            conn.execute(sql.PARK_BATCH, parked_row(parked))
            return True

    def resume_run(self, run_id: str, *, max_tokens: int | None, max_cost: float | None) -> list[Parked]:
        with self.transaction() as conn:
            refused = rules.not_resumable(run_id, self._locked_status(conn, run_id))
            if refused:
                raise ConfigError(refused)
            conn.execute(sql.RESUME_RUN, {"run": run_id, "max_tokens": max_tokens, "max_cost": max_cost})
            found = conn.execute(sql.PARKED, {"run": run_id}).all()
        return [parked_of(row) for row in found]

    def unpark(self, parked: Sequence[Parked]) -> None:
        if not parked:
            return
        with self.transaction() as conn:
            conn.execute(sql.UNPARK, [{"run_id": p.run_id, "batch": p.batch, "parked_at": p.parked_at} for p in parked])

    def _locked_status(self, conn: sa.Connection, run_id: str) -> RunStatus:
        status = conn.execute(sql.LOCK_RUN_STATUS, {"run": run_id}).scalar_one_or_none()
        if status is None:
            raise ConfigError(rules.unknown_run(run_id))
        return RunStatus(status)

    # -- failures --------------------------------------------------------------------

    def add_spend(self, rows: Sequence[Spend]) -> None:
        if not rows:
            return
        with self.transaction() as conn:
            conn.execute(sql.ADD_SPEND, [spend_row(row) for row in rows])

    def run_spend(self, run_id: str) -> list[Spend]:
        with self.transaction() as conn:
            found = conn.execute(sql.RUN_SPEND, {"run": run_id}).all()
        return [spend_of(row) for row in found]

    def runs_spend(self, run_ids: Sequence[str]) -> dict[str, list[Spend]]:
        if not run_ids:
            return {}
        with self.transaction() as conn:
            found = conn.execute(sql.RUNS_SPEND, {"runs": list(run_ids)}).all()
        spent: dict[str, list[Spend]] = {}
        for row in found:
            spent.setdefault(row.run_id, []).append(spend_of(row))
        return spent

    def record_failure(self, collection: str, record_id: str, error: str, *, run_id: str | None = None) -> None:
        # An id PostgreSQL cannot store (a NUL, a lone surrogate, too long to key a row) is kept as
        # ``rules.kept_record_id`` says: the failure is still told.
        failure = {
            "collection": collection,
            "record_id": rules.kept_record_id(record_id),
            "error": rules.kept_error(escape_unstorable(error)),
            "attempts": rules.attempts_after(None),
            "run_id": run_id,
            "last_seen": now(),
        }
        with self.transaction() as conn:
            conn.execute(sql.RECORD_FAILURE, failure)

    def failures(self, collection: str | None = None) -> list[Failure]:
        query, params = (sql.FAILURES, {}) if collection is None else (sql.FAILURES_OF, {"collection": collection})
        with self.transaction() as conn:
            found = conn.execute(query, params).all()
        return [failure_of(row) for row in found]

    def overview(self) -> Overview:
        with self.transaction() as conn:
            counts: dict[str, int] = {status: n for status, n in conn.execute(sql.RUNS_PER_STATUS)}
            open_ids = conn.scalars(sql.OPEN_RUNS, {"limit": rules.MAX_OPEN_RUNS}).all()
            failed: dict[str, int] = {name: n for name, n in conn.execute(sql.FAILURES_PER_COLLECTION)}
        return rules.overview(counts, [self.run(run_id) for run_id in open_ids], failed)
