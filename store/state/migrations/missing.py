"""What the revisions build, built only where it is missing: a database made before there were migrations
already has some of it, and keeps it with its rows.

Revisions are plain SQL, frozen as they shipped: SQL does not change when SQLAlchemy's DDL rendering or
``store.state.tables`` do. Table and column names are the revision's own constants, never user values.

Read from the catalog first, so an existing table is never altered for what it has: ALTER TABLE takes an
exclusive lock on the table even when ``IF NOT EXISTS`` then does nothing, and workers of an older release may
be using it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

__all__ = ["add_column", "ensure_table"]

#: A definition's lines that are constraints, not columns.
_CONSTRAINTS = ("PRIMARY KEY", "UNIQUE", "CONSTRAINT", "FOREIGN KEY", "CHECK")


def ensure_table(name: str, definition: str, indexes: dict[str, str] | None = None) -> None:
    """Create table ``name`` from ``definition`` (one column or constraint a line, as inside CREATE TABLE's
    parentheses) with its ``indexes`` (name: indexed columns) unless it exists; a table that exists gains the
    columns it lacks."""
    lines = [line.strip().rstrip(",") for line in definition.strip().splitlines() if line.strip()]
    if sa.inspect(op.get_bind()).has_table(name):
        for column in (line for line in lines if not line.upper().startswith(_CONSTRAINTS)):
            add_column(name, column)
        return
    op.execute(f"CREATE TABLE IF NOT EXISTS {name} ({', '.join(lines)})")
    for index, indexed in (indexes or {}).items():
        op.execute(f"CREATE INDEX IF NOT EXISTS {index} ON {name} ({indexed})")


def add_column(table: str, column: str) -> None:
    """Add ``column`` (its definition: name, type, constraints) to ``table`` unless it has one of that name."""
    if column.split()[0].strip('"') in {found["name"] for found in sa.inspect(op.get_bind()).get_columns(table)}:
        return
    op.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column}")
