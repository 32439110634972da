"""Alembic's entry point for the state database: runs the revisions on the connection ``upgrade`` passes in.

Only ``store.state.migrations.upgrade`` runs it (there is no alembic.ini); the caller holds the transaction.
"""

from __future__ import annotations

from alembic import context

from store.state.migrations import VERSION_TABLE

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("the state migrations run through store.state.migrations.upgrade(connection), not alembic")
context.configure(connection=connection, version_table=VERSION_TABLE)
with context.begin_transaction():
    context.run_migrations()
