"""0005: run budgets: ``max_tokens`` and ``max_cost`` on ``vectorsync_runs`` (a run's own caps), and
``vectorsync_parked_batches``, the batches of a paused run put aside until ``vectorsync runs resume``."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from store.state.migrations.missing import add_column, create_table

revision = "0005"
down_revision: str | None = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_column("vectorsync_runs", sa.Column("max_tokens", sa.BigInteger))
    add_column("vectorsync_runs", sa.Column("max_cost", sa.Float))
    create_table(
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
