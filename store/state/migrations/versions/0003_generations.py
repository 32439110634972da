"""0003: the generations of migrated collections: ``vectorsync_aliases`` (the generation a collection
reads) and ``vectorsync_generations`` (each generation's chain, models and size)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from store.state.migrations.missing import create_table

revision = "0003"
down_revision: str | None = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_table(
        "vectorsync_aliases",
        sa.Column("collection", sa.Text, primary_key=True),
        sa.Column("live", sa.Integer, nullable=False),
        sa.Column("switched_at", sa.DateTime(timezone=True)),
    )
    create_table(
        "vectorsync_generations",
        sa.Column("collection", sa.Text, primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("chain", postgresql.JSONB, nullable=False),
        sa.Column("models", postgresql.JSONB, nullable=False),
        sa.Column("dimensions", sa.Integer, nullable=False),
        sa.Column("run_id", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    raise NotImplementedError("the state database is never downgraded: restore a backup instead")
