"""0001: the state tables: the ledger, runs and their batches, failures, the generations of migrated collections
(aliases and generations), spend, and the parked batches of paused runs.

Each table is made where it is missing; a table a vectorsync from before migrations made gains the columns it
lacks, with their defaults, and keeps its rows. Frozen as shipped: a change to ``store.state.tables`` is a new
revision, never an edit of this one.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from store.state.migrations.missing import ensure_table

revision = "0001"
down_revision: str | None = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    ensure_table(
        "vectorsync_ledger",
        sa.Column("collection", sa.Text, primary_key=True),
        sa.Column("record_id", sa.Text, primary_key=True),
        sa.Column("content_hash", sa.Text, nullable=False),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("chunks", sa.Integer, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("stamp", sa.Text, nullable=False, server_default=""),
        sa.Column("indexed_at", sa.DateTime(timezone=True), nullable=False),
    )
    ensure_table(
        "vectorsync_runs",
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("collection", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False, server_default="reindex"),
        sa.Column("full", sa.Boolean, nullable=False),
        sa.Column("total", sa.Integer),
        sa.Column("batches", sa.Integer),
        sa.Column("deferred_index", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("error", sa.Text, nullable=False, server_default=""),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.Column("max_tokens", sa.BigInteger),
        sa.Column("max_cost", sa.Float),
        indexes={"ix_vectorsync_runs_collection": ["collection"]},
    )
    ensure_table(
        "vectorsync_run_batches",
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("batch", sa.Integer, primary_key=True),
        sa.Column("done", sa.Integer, nullable=False),
        sa.Column("skipped", sa.Integer, nullable=False),
        sa.Column("failed", sa.Integer, nullable=False),
        sa.Column("counted_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    ensure_table(
        "vectorsync_failures",
        sa.Column("collection", sa.Text, primary_key=True),
        sa.Column("record_id", sa.Text, primary_key=True),
        sa.Column("error", sa.Text, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("run_id", sa.Text),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
    )
    ensure_table(
        "vectorsync_aliases",
        sa.Column("collection", sa.Text, primary_key=True),
        sa.Column("live", sa.Integer, nullable=False),
        sa.Column("switched_at", sa.DateTime(timezone=True)),
    )
    ensure_table(
        "vectorsync_generations",
        sa.Column("collection", sa.Text, primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("chain", postgresql.JSONB, nullable=False),
        sa.Column("models", postgresql.JSONB, nullable=False),
        sa.Column("dimensions", sa.Integer, nullable=False),
        sa.Column("run_id", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    ensure_table(
        "vectorsync_spend",
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("collection", sa.Text, primary_key=True),
        sa.Column("model", sa.Text, primary_key=True),
        sa.Column("generation", sa.Integer, primary_key=True),
        sa.Column("tokens", sa.BigInteger, nullable=False),
        sa.Column("calls", sa.BigInteger, nullable=False),
        sa.Column("cost", sa.Float),
        sa.Column("counted_by", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    ensure_table(
        "vectorsync_parked_batches",
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("batch", sa.Integer, primary_key=True),
        sa.Column("collection", sa.Text, nullable=False),
        sa.Column("ids", postgresql.JSONB, nullable=False),
        sa.Column("carried", postgresql.JSONB),
        sa.Column("fresh", sa.Boolean, nullable=False),
        sa.Column("parked_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    raise NotImplementedError("the state database is never downgraded: restore a backup instead")
