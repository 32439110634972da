"""0002: the columns the state tables gained after they were first made.

``vectorsync_runs.kind`` (reindex or reconcile), ``vectorsync_ledger.stamp`` (the source's updated_at,
for reconcile sweeps), ``vectorsync_run_batches.counted_at`` (when a run last moved) and
``vectorsync_runs.deferred_index`` (a bulk load builds its index last). Before migrations, the ledger
added the last three at each start; ``kind`` it never added, so a database from before it had no way
up until now. Rows already there take the defaults.
"""

from __future__ import annotations

import sqlalchemy as sa

from store.state.migrations.missing import add_column

revision = "0002"
down_revision: str | None = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_column("vectorsync_runs", sa.Column("kind", sa.Text, nullable=False, server_default="reindex"))
    add_column("vectorsync_ledger", sa.Column("stamp", sa.Text, nullable=False, server_default=""))
    add_column(
        "vectorsync_run_batches",
        sa.Column("counted_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    add_column("vectorsync_runs", sa.Column("deferred_index", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    raise NotImplementedError("the state database is never downgraded: restore a backup instead")
