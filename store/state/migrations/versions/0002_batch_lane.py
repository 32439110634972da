"""0002: the batch lane (``store.batches``): a run's lane, the texts it sends to a provider's batch endpoint and
what came back, the provider's jobs, and the run's batches waiting for them. Frozen as shipped."""

from __future__ import annotations

from store.state.migrations.missing import add_column, ensure_table

revision = "0002"
down_revision: str | None = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_column("vectorsync_runs", "lane text NOT NULL DEFAULT 'sync'")
    ensure_table(
        "vectorsync_lane_texts",
        """
            run_id text NOT NULL,
            model text NOT NULL,
            text_hash text NOT NULL,
            text text NOT NULL,
            submission text,
            line integer,
            position integer,
            vector bytea,
            error text,
            PRIMARY KEY (run_id, model, text_hash)
        """,
        {"ix_vectorsync_lane_texts_submission": "submission, line, position"},
    )
    ensure_table(
        "vectorsync_lane_jobs",
        """
            submission text NOT NULL,
            run_id text NOT NULL,
            model text NOT NULL,
            job_id text,
            status text NOT NULL,
            lines integer NOT NULL,
            completed integer NOT NULL DEFAULT 0,
            failed integer NOT NULL DEFAULT 0,
            tokens bigint NOT NULL DEFAULT 0,
            error text NOT NULL DEFAULT '',
            submitted_at timestamp with time zone NOT NULL,
            finished_at timestamp with time zone,
            PRIMARY KEY (submission)
        """,
        {"ix_vectorsync_lane_jobs_run_id": "run_id"},
    )
    ensure_table(
        "vectorsync_lane_tally",
        """
            run_id text NOT NULL,
            outcome text NOT NULL,
            count bigint NOT NULL,
            PRIMARY KEY (run_id, outcome)
        """,
    )
    ensure_table(
        "vectorsync_lane_looks",
        """
            run_id text NOT NULL,
            token text NOT NULL,
            due timestamp with time zone NOT NULL,
            PRIMARY KEY (run_id)
        """,
    )
    ensure_table(
        "vectorsync_lane_waiting",
        """
            run_id text NOT NULL,
            batch integer NOT NULL,
            message jsonb NOT NULL,
            waited_at timestamp with time zone NOT NULL,
            PRIMARY KEY (run_id, batch)
        """,
    )


def downgrade() -> None:
    raise NotImplementedError("the state database is never downgraded: restore a backup instead")
