"""0004: ``vectorsync_spend``, the tokens, calls and cost of model calls per run, collection, model and
generation."""

from __future__ import annotations

import sqlalchemy as sa

from store.state.migrations.missing import create_table

revision = "0004"
down_revision: str | None = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_table(
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


def downgrade() -> None:
    raise NotImplementedError("the state database is never downgraded: restore a backup instead")
