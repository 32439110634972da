"""0001: the state tables as first made: the ledger, runs, their batches and failures.

Frozen as the first release made them (no ``kind``, ``stamp``, ``counted_at`` or ``deferred_index``:
0002 adds those); never change it, add a revision.
"""

from __future__ import annotations

import sqlalchemy as sa

from store.state.migrations.missing import create_table

revision = "0001"
down_revision: str | None = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_table(
        "vectorsync_ledger",
        sa.Column("collection", sa.Text, primary_key=True),
        sa.Column("record_id", sa.Text, primary_key=True),
        sa.Column("content_hash", sa.Text, nullable=False),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("chunks", sa.Integer, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("indexed_at", sa.DateTime(timezone=True), nullable=False),
    )
    create_table(
        "vectorsync_runs",
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("collection", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("full", sa.Boolean, nullable=False),
        sa.Column("total", sa.Integer),
        sa.Column("batches", sa.Integer),
        sa.Column("error", sa.Text, nullable=False, server_default=""),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        indexes={"ix_vectorsync_runs_collection": ["collection"]},
    )
    create_table(
        "vectorsync_run_batches",
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("batch", sa.Integer, primary_key=True),
        sa.Column("done", sa.Integer, nullable=False),
        sa.Column("skipped", sa.Integer, nullable=False),
        sa.Column("failed", sa.Integer, nullable=False),
    )
    create_table(
        "vectorsync_failures",
        sa.Column("collection", sa.Text, primary_key=True),
        sa.Column("record_id", sa.Text, primary_key=True),
        sa.Column("error", sa.Text, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("run_id", sa.Text),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    raise NotImplementedError("the state database is never downgraded: restore a backup instead")
