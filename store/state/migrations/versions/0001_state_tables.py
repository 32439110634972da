"""0001: the state tables: the ledger, runs and their batches, failures, the generations of migrated collections
(aliases and generations), spend, and the parked batches of paused runs.

Each table is made where it is missing; a table a vectorsync from before migrations made gains the columns it
lacks, with their defaults, and keeps its rows. Frozen as shipped: a change to ``store.state.tables`` is a new
revision, never an edit of this one.
"""

from __future__ import annotations

from store.state.migrations.missing import ensure_table

revision = "0001"
down_revision: str | None = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    ensure_table(
        "vectorsync_ledger",
        """
            collection text NOT NULL,
            record_id text NOT NULL,
            content_hash text NOT NULL,
            model text NOT NULL,
            chunks integer NOT NULL,
            version bigint NOT NULL DEFAULT '0',
            stamp text NOT NULL DEFAULT '',
            indexed_at timestamp with time zone NOT NULL,
            PRIMARY KEY (collection, record_id)
        """,
    )
    ensure_table(
        "vectorsync_runs",
        """
            run_id text NOT NULL,
            collection text NOT NULL,
            status text NOT NULL,
            kind text NOT NULL DEFAULT 'reindex',
            "full" boolean NOT NULL,
            total integer,
            batches integer,
            deferred_index boolean NOT NULL DEFAULT false,
            error text NOT NULL DEFAULT '',
            started_at timestamp with time zone NOT NULL,
            finished_at timestamp with time zone,
            max_tokens bigint,
            max_cost double precision,
            PRIMARY KEY (run_id)
        """,
        {"ix_vectorsync_runs_collection": "collection"},
    )
    ensure_table(
        "vectorsync_run_batches",
        """
            run_id text NOT NULL,
            batch integer NOT NULL,
            done integer NOT NULL,
            skipped integer NOT NULL,
            failed integer NOT NULL,
            counted_at timestamp with time zone NOT NULL DEFAULT now(),
            PRIMARY KEY (run_id, batch)
        """,
    )
    ensure_table(
        "vectorsync_failures",
        """
            collection text NOT NULL,
            record_id text NOT NULL,
            error text NOT NULL,
            attempts integer NOT NULL,
            run_id text,
            last_seen timestamp with time zone NOT NULL,
            PRIMARY KEY (collection, record_id)
        """,
    )
    ensure_table(
        "vectorsync_aliases",
        """
            collection text NOT NULL,
            live integer NOT NULL,
            switched_at timestamp with time zone,
            PRIMARY KEY (collection)
        """,
    )
    ensure_table(
        "vectorsync_generations",
        """
            collection text NOT NULL,
            number integer NOT NULL,
            chain jsonb NOT NULL,
            models jsonb NOT NULL,
            dimensions integer NOT NULL,
            run_id text,
            created_at timestamp with time zone NOT NULL,
            PRIMARY KEY (collection, number)
        """,
    )
    ensure_table(
        "vectorsync_spend",
        """
            run_id text NOT NULL,
            collection text NOT NULL,
            model text NOT NULL,
            generation integer NOT NULL,
            tokens bigint NOT NULL,
            calls bigint NOT NULL,
            cost double precision,
            counted_by text NOT NULL,
            updated_at timestamp with time zone NOT NULL DEFAULT now(),
            PRIMARY KEY (run_id, collection, model, generation)
        """,
    )
    ensure_table(
        "vectorsync_parked_batches",
        """
            run_id text NOT NULL,
            batch integer NOT NULL,
            collection text NOT NULL,
            ids jsonb NOT NULL,
            carried jsonb,
            fresh boolean NOT NULL,
            parked_at timestamp with time zone NOT NULL,
            PRIMARY KEY (run_id, batch)
        """,
    )


def downgrade() -> None:
    raise NotImplementedError("the state database is never downgraded: restore a backup instead")
