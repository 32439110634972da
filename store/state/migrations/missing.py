"""What the revisions build, built only where it is missing: a database made before there were migrations
already has some of it, and keeps it with its rows.

Read from the catalog first, so an existing table is never altered for what it has: ALTER TABLE takes an
exclusive lock on the table even when ``IF NOT EXISTS`` then does nothing, and workers of an older release may
be using it.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

__all__ = ["add_column", "ensure_table"]


def ensure_table(name: str, *columns: sa.Column[Any], indexes: dict[str, list[str]] | None = None) -> None:
    """Create table ``name`` with its ``indexes`` (name: columns) unless it exists; a table that exists gains the
    ``columns`` it lacks."""
    inspector = sa.inspect(op.get_bind())
    if inspector.has_table(name):
        found = {column["name"] for column in inspector.get_columns(name)}
        for column in columns:
            if column.name not in found:
                op.add_column(name, column, if_not_exists=True)
        return
    op.create_table(name, *columns, if_not_exists=True)
    for index, indexed in (indexes or {}).items():
        op.create_index(index, name, indexed, if_not_exists=True)


def add_column(table: str, column: sa.Column[Any]) -> None:
    """Add ``column`` to ``table`` unless it has it (a later revision's new column)."""
    if column.name in {found["name"] for found in sa.inspect(op.get_bind()).get_columns(table)}:
        return
    op.add_column(table, column, if_not_exists=True)
