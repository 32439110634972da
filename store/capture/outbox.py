"""One source database's outbox and the triggers that fill it: install, remove, inspect, and claim rows."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

import store.capture.sql as sql
from store.capture.sql import Target
from store.capture.target import outbox_schema, read_target
from store.connect.postgres import advisory_lock, make_engine, safe_url, transaction
from store.errors import ConfigError
from store.settings import NetworkSettings, SourceSettings

__all__ = ["Change", "Installation", "Outbox", "Pending", "Waiting"]


@dataclass(frozen=True, slots=True)
class Change:
    """One outbox row: a record id that changed, or a TRUNCATE of the collection's table (``record_id`` None),
    and when the writer wrote it (epoch seconds; None: unknown)."""

    seq: int
    collection: str
    record_id: str | None
    truncated: bool
    at: float | None = None


@dataclass(frozen=True, slots=True)
class Pending:
    """A collection's rows waiting in the outbox, and how long the oldest has waited."""

    collection: str
    rows: int
    lag_seconds: float


@dataclass(frozen=True, slots=True)
class Waiting:
    """The outbox rows that will reindex one record (its own, or a TRUNCATE of its table), and the oldest's time."""

    rows: int
    since: datetime | None


@dataclass(frozen=True, slots=True)
class Installation:
    """Which of a collection's triggers exist (and are enabled), and whether its function does."""

    triggers: dict[str, bool]
    function: bool
    expected: int

    @property
    def complete(self) -> bool:
        return self.function and len(self.triggers) == self.expected and all(self.triggers.values())

    @property
    def absent(self) -> bool:
        return not self.function and not self.triggers


class Outbox:
    """The outbox of the source database at ``url`` (in its role's ``current_schema()``); its connections notice
    a silent database as ``network`` says (None: the defaults)."""

    def __init__(self, url: str, *, network: NetworkSettings | None = None) -> None:
        self.url = url
        self.safe_url = safe_url(url)
        self.engine = make_engine(url, setting="source.url", network=network, pool_pre_ping=True, pool_size=2)
        self._schema: str | None = None

    def _outbox_schema(self, conn: sa.Connection) -> str:
        """The outbox's schema (``store.capture.target.outbox_schema``), read once."""
        if self._schema is None:
            self._schema = outbox_schema(conn)
        return self._schema

    def target(self, name: str, source: SourceSettings) -> Target:
        """Collection ``name``'s target, read from the catalog. Raises ConfigError, StoreUnavailable."""
        with transaction(self.engine, f"source database {self.safe_url}") as conn:
            return read_target(name, source, conn)

    def enable(self, target: Target) -> None:
        """Install (or replace) the outbox, the function and the triggers, in one transaction."""
        self._ddl(target, sql.install_ddl(target), "create triggers on")

    def disable(self, target: Target) -> None:
        """Remove the triggers and the function; pending rows stay for the relay."""
        self._ddl(target, sql.remove_ddl(target), "drop the triggers of")

    def _ddl(self, target: Target, statements: Sequence[str], action: str) -> None:
        import psycopg

        try:
            with self.engine.begin() as conn:
                # Behind a long query, DROP TRIGGER's lock would queue every read and write of the table.
                conn.exec_driver_sql("SET LOCAL lock_timeout = '10s'")
                advisory_lock(conn, "vectorsync capture outbox")  # one installer at a time, outbox included
                for statement in statements:
                    conn.exec_driver_sql(statement)
        except sa.exc.DBAPIError as exc:
            if isinstance(exc.orig, psycopg.errors.InsufficientPrivilege):
                raise ConfigError(
                    f"the role of source.url ({self.safe_url}) may not {action} table {target.table!r}: "
                    f"{exc.orig}. Have the table's owner run what `vectorsync capture sql {target.collection}"
                    f"{'' if 'create' in action else ' --remove'}` prints, or connect as that owner"
                ) from None
            from store.connect.postgres import translate

            raise translate(exc, f"source database {self.safe_url}") from exc

    def installed(self, target: Target) -> Installation:
        """What of ``target``'s capture the catalog holds (``pg_trigger``, ``pg_proc``)."""
        with transaction(self.engine, f"source database {self.safe_url}") as conn:
            rows = conn.execute(
                sql.INSTALLED,
                {
                    "table": target.qualified_table,
                    "triggers": list(target.triggers),
                    "schema": target.schema,
                    "function": target.function,
                },
            ).all()
        triggers = {str(name): bool(enabled) for name, enabled in rows if name != target.function}
        return Installation(
            triggers=triggers, function=any(name == target.function for name, _ in rows), expected=len(target.triggers)
        )

    def current(self, target: Target) -> bool:
        """Whether ``target``'s capture is in place as ``enable`` would install it (triggers, function body),
        and this role may relay its outbox: what a DBA installed from ``capture sql``."""
        if not self.installed(target).complete:
            return False
        with transaction(self.engine, f"source database {self.safe_url}") as conn:
            return (
                conn.execute(
                    sql.CURRENT,
                    {
                        "source": sql.function_source(target),
                        "schema": target.schema,
                        "function": target.function,
                        "outbox": _qualified(target.outbox_schema),
                    },
                ).scalar()
                is True
            )

    def _exists(self, conn: sa.Connection) -> bool:
        return conn.execute(sql.OUTBOX_EXISTS, {"outbox": _qualified(self._outbox_schema(conn))}).scalar() is not None

    def exists(self) -> bool:
        with transaction(self.engine, f"source database {self.safe_url}") as conn:
            return self._exists(conn)

    def pending(self) -> list[Pending]:
        """Rows waiting per collection (every collection, declared or not); none when there is no outbox."""
        with transaction(self.engine, f"source database {self.safe_url}") as conn:
            if not self._exists(conn):
                return []
            rows = conn.execute(sql.stats(self._outbox_schema(conn)))
            return [Pending(str(c), int(n), float(lag)) for c, n, lag in rows]

    def waiting(self, collection: str, record_id: str) -> Waiting:
        """The rows waiting for ``record_id`` of ``collection``; none when there is no outbox."""
        with transaction(self.engine, f"source database {self.safe_url}") as conn:
            if not self._exists(conn):
                return Waiting(0, None)
            found = conn.execute(
                sql.waiting(self._outbox_schema(conn)), {"collection": collection, "record_id": record_id}
            ).one()
            return Waiting(int(found[0]), found[1])

    @contextmanager
    def claim(self, names: Sequence[str], limit: int) -> Iterator[list[Change]]:
        """Up to ``limit`` rows of ``names``, oldest first, locked against other relays; they are deleted when
        the block ends without an error, and left for the next claim when it raises."""
        with transaction(self.engine, f"source database {self.safe_url}") as conn:
            schema = self._outbox_schema(conn)
            rows = conn.execute(sql.claim(schema), {"names": list(names), "limit": limit}).all()
            changes = [
                Change(int(seq), str(c), None if r is None else str(r), bool(t), None if at is None else float(at))
                for seq, c, r, t, at in rows
            ]
            yield changes
            if changes:
                conn.execute(sql.delete(schema), {"seqs": [change.seq for change in changes]})

    def close(self) -> None:
        self.engine.dispose()


def _qualified(schema: str) -> str:
    return f"{sql.quote(schema)}.{sql.OUTBOX}"
