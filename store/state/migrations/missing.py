"""What the revisions build, built only where it is missing: a database made before there were migrations
already has some of it, and keeps it with its rows.

Read from the catalog first, so an existing table is never altered: ALTER TABLE takes an exclusive lock on
the table even when ``IF NOT EXISTS`` then does nothing, and workers of an older release may be using it.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

__all__ = ["add_column", "create_table"]


def create_table(name: str, *columns: sa.Column[Any], indexes: dict[str, list[str]] | None = None) -> None:
    """Create table ``name`` with its ``indexes`` (name: columns) unless it exists."""
    if sa.inspect(op.get_bind()).has_table(name):
        return
    op.create_table(name, *columns, if_not_exists=True)
    for index, indexed in (indexes or {}).items():
        op.create_index(index, name, indexed, if_not_exists=True)


def add_column(table: str, column: sa.Column[Any]) -> None:
    """Add ``column`` to ``table`` unless it has it."""
    if column.name in {found["name"] for found in sa.inspect(op.get_bind()).get_columns(table)}:
        return
    op.add_column(table, column, if_not_exists=True)
