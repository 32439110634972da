"""State databases for the migration tests: each a fresh database on the session's PostgreSQL, loaded with
a schema an older vectorsync made (``fixtures/``) and read back from the catalog."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from psycopg import sql

from store.connect.postgres import engine_url
from store.state.migrations import VERSION_TABLE

__all__ = [
    "FIXTURES",
    "WHEN",
    "catalog",
    "fill_first_release",
    "fill_main",
    "fresh_database",
    "load_schema",
    "stamp",
    "version",
]

FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: When the rows the fixtures are filled with were written.
WHEN = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


@contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new, empty database on the server at ``server_url``, dropped afterwards; yields its URL."""
    name = f"vs_state_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(engine_url(server_url), isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    with admin.connect() as conn:
        conn.connection.driver_connection.execute(  # type: ignore[union-attr]
            sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        )
    try:
        yield sa.engine.make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.connection.driver_connection.execute(  # type: ignore[union-attr]
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        admin.dispose()


def execute(url: str, statement: str, params: dict[str, Any] | None = None) -> list[Any]:
    """Run one statement in its own transaction; the rows it returns."""
    engine = sa.create_engine(engine_url(url), poolclass=sa.NullPool)
    try:
        with engine.begin() as conn:
            result = conn.execute(sa.text(statement), params or {})
            return list(result) if result.returns_rows else []
    finally:
        engine.dispose()


def load_schema(url: str, name: str) -> None:
    """Create the state tables as ``fixtures/state_schema_<name>.sql`` (an older vectorsync's dump) has them."""
    engine = sa.create_engine(engine_url(url), poolclass=sa.NullPool)
    try:
        with engine.begin() as conn:  # a script of many statements, sent as one (no parameters)
            conn.connection.driver_connection.execute(  # type: ignore[union-attr]
                (FIXTURES / f"state_schema_{name}.sql").read_text()
            )
    finally:
        engine.dispose()


def stamp(url: str, revision: str) -> None:
    """Record ``revision`` as the database's schema version, as a vectorsync that shipped it would."""
    execute(url, f"UPDATE {VERSION_TABLE} SET version_num = :revision", {"revision": revision})


_COLUMNS = """
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid)
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' AND starts_with(c.relname, 'vectorsync_')
  AND a.attnum > 0 AND NOT a.attisdropped
"""
_CONSTRAINTS = """
SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
WHERE connamespace = current_schema()::regnamespace AND starts_with(conrelid::regclass::text, 'vectorsync_')
"""
_INDEXES = """
SELECT tablename, indexname, indexdef FROM pg_indexes
WHERE schemaname = current_schema() AND starts_with(tablename, 'vectorsync_')
"""


def catalog(url: str) -> dict[str, set[tuple[Any, ...]]]:
    """The state tables as the catalog tells them: columns (type, not null, default), constraints, indexes.
    Sets: the order columns were added in is left out (a column added later comes last)."""
    return {
        what: {tuple(row) for row in execute(url, query)}
        for what, query in (("columns", _COLUMNS), ("constraints", _CONSTRAINTS), ("indexes", _INDEXES))
    }


def version(url: str) -> list[str]:
    """The revisions the database at ``url`` records."""
    return [row[0] for row in execute(url, f"SELECT version_num FROM {VERSION_TABLE}")]


def fill_first_release(url: str) -> None:
    """A row in every table the first release had, in its columns only."""
    execute(
        url,
        "INSERT INTO vectorsync_ledger (collection, record_id, content_hash, model, chunks, version, "
        "indexed_at) VALUES ('notes', 'a', 'h1', 'small', 3, 7, :when)",
        {"when": WHEN},
    )
    execute(
        url,
        'INSERT INTO vectorsync_runs (run_id, collection, status, "full", total, batches, error, '
        "started_at) VALUES ('run1', 'notes', 'running', false, 10, 2, '', :when)",
        {"when": WHEN},
    )
    execute(
        url, "INSERT INTO vectorsync_run_batches (run_id, batch, done, skipped, failed) VALUES ('run1', 0, 4, 1, 0)"
    )
    execute(
        url,
        "INSERT INTO vectorsync_failures (collection, record_id, error, attempts, run_id, last_seen) "
        "VALUES ('notes', 'b', 'boom', 2, 'run1', :when)",
        {"when": WHEN},
    )


def fill_main(url: str) -> None:
    """A row in every table today's main has, every column given."""
    execute(
        url, "INSERT INTO vectorsync_ledger VALUES ('notes', 'a', 'h1', 'small', 3, 7, 'stamp1', :when)", {"when": WHEN}
    )
    execute(
        url,
        'INSERT INTO vectorsync_runs (run_id, collection, status, kind, "full", total, batches, '
        "deferred_index, error, started_at) VALUES ('run1', 'notes', 'running', 'reconcile', true, 10, 2, "
        "true, '', :when)",
        {"when": WHEN},
    )
    execute(url, "INSERT INTO vectorsync_run_batches VALUES ('run1', 0, 4, 1, 0, :when)", {"when": WHEN})
    execute(url, "INSERT INTO vectorsync_failures VALUES ('notes', 'b', 'boom', 2, 'run1', :when)", {"when": WHEN})
    execute(url, "INSERT INTO vectorsync_aliases VALUES ('notes', 1, NULL)")
    execute(
        url,
        "INSERT INTO vectorsync_generations VALUES ('notes', 1, '[\"small\"]', '{\"small\": \"m\"}', 8, "
        "NULL, :when), ('notes', 2, '[\"large\"]', '{}', 16, 'run1', :when)",
        {"when": WHEN},
    )
