"""Every table of the state database, in one place: what the code reads and writes, and what the migrations
(``store.state.migrations``) must build. A test compares the two, so they cannot drift apart.

- ``vectorsync_ledger``: what each record was indexed from (content hash, model, chunks, version, stamp).
- ``vectorsync_runs`` and ``vectorsync_run_batches``: reindex and reconcile runs, each batch counted once.
- ``vectorsync_failures``: records that failed after their retries, with their error.
- ``vectorsync_aliases`` and ``vectorsync_generations``: the generations of migrated collections.
- ``vectorsync_parked_batches``: batches of a paused run, put aside until it is resumed.
- ``vectorsync_lane_texts``, ``vectorsync_lane_jobs``, ``vectorsync_lane_waiting``, ``vectorsync_lane_looks``,
  ``vectorsync_lane_tally``: a batch-lane run's texts sent to a provider's batch endpoint and their answers, its
  jobs there, its batches waiting for them, its next look at them, and what went another way (``store.batches``).
- ``vectorsync_spend``: tokens, calls and cost of model calls per run ("" outside one), collection, model and
  generation (``store.calls.spend``).

The migrations keep their own frozen copies of these definitions: a migration is what a release did, and
must not change when this module does. A change here needs a new revision there.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

__all__ = [
    "aliases",
    "failures",
    "generations",
    "lane_jobs",
    "lane_looks",
    "lane_tally",
    "lane_texts",
    "lane_waiting",
    "ledger",
    "metadata",
    "parked_batches",
    "run_batches",
    "runs",
    "spend",
]

#: The state tables, and only them (the vector tables belong to the pgvector store).
metadata = sa.MetaData()

ledger = sa.Table(
    "vectorsync_ledger",
    metadata,
    sa.Column("collection", sa.Text, primary_key=True),
    sa.Column("record_id", sa.Text, primary_key=True),
    sa.Column("content_hash", sa.Text, nullable=False),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("chunks", sa.Integer, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("stamp", sa.Text, nullable=False, server_default=""),
    sa.Column("indexed_at", sa.DateTime(timezone=True), nullable=False),
)
runs = sa.Table(
    "vectorsync_runs",
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("collection", sa.Text, nullable=False, index=True),
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
    sa.Column("lane", sa.Text, nullable=False, server_default="sync"),
)
run_batches = sa.Table(
    "vectorsync_run_batches",
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("batch", sa.Integer, primary_key=True),
    sa.Column("done", sa.Integer, nullable=False),
    sa.Column("skipped", sa.Integer, nullable=False),
    sa.Column("failed", sa.Integer, nullable=False),
    sa.Column("counted_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
)
failures = sa.Table(
    "vectorsync_failures",
    metadata,
    sa.Column("collection", sa.Text, primary_key=True),
    sa.Column("record_id", sa.Text, primary_key=True),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("run_id", sa.Text),
    sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
)
aliases = sa.Table(
    "vectorsync_aliases",
    metadata,
    sa.Column("collection", sa.Text, primary_key=True),
    sa.Column("live", sa.Integer, nullable=False),
    sa.Column("switched_at", sa.DateTime(timezone=True)),
)
generations = sa.Table(
    "vectorsync_generations",
    metadata,
    sa.Column("collection", sa.Text, primary_key=True),
    sa.Column("number", sa.Integer, primary_key=True),
    sa.Column("chain", postgresql.JSONB, nullable=False),
    sa.Column("models", postgresql.JSONB, nullable=False),
    sa.Column("dimensions", sa.Integer, nullable=False),
    sa.Column("run_id", sa.Text),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
spend = sa.Table(
    "vectorsync_spend",
    metadata,
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
parked_batches = sa.Table(
    "vectorsync_parked_batches",
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("batch", sa.Integer, primary_key=True),
    sa.Column("collection", sa.Text, nullable=False),
    sa.Column("ids", postgresql.JSONB, nullable=False),
    sa.Column("carried", postgresql.JSONB),
    sa.Column("fresh", sa.Boolean, nullable=False),
    sa.Column("parked_at", sa.DateTime(timezone=True), nullable=False),
)
lane_texts = sa.Table(
    "vectorsync_lane_texts",
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("model", sa.Text, primary_key=True),
    sa.Column("text_hash", sa.Text, primary_key=True),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("submission", sa.Text),
    sa.Column("line", sa.Integer),
    sa.Column("position", sa.Integer),
    sa.Column("vector", sa.LargeBinary),
    sa.Column("error", sa.Text),
    sa.Index("ix_vectorsync_lane_texts_submission", "submission", "line", "position"),
)
lane_jobs = sa.Table(
    "vectorsync_lane_jobs",
    metadata,
    sa.Column("submission", sa.Text, primary_key=True),
    sa.Column("run_id", sa.Text, nullable=False, index=True),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("job_id", sa.Text),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("lines", sa.Integer, nullable=False),
    sa.Column("completed", sa.Integer, nullable=False, server_default="0"),
    sa.Column("failed", sa.Integer, nullable=False, server_default="0"),
    sa.Column("tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("error", sa.Text, nullable=False, server_default=""),
    sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("finished_at", sa.DateTime(timezone=True)),
)
lane_tally = sa.Table(
    "vectorsync_lane_tally",
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("outcome", sa.Text, primary_key=True),
    sa.Column("count", sa.BigInteger, nullable=False),
)
lane_looks = sa.Table(
    "vectorsync_lane_looks",
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("token", sa.Text, nullable=False),
    sa.Column("due", sa.DateTime(timezone=True), nullable=False),
)
lane_waiting = sa.Table(
    "vectorsync_lane_waiting",
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("batch", sa.Integer, primary_key=True),
    #: What its ``index_batch`` message carried: collection, ids, carried, fresh.
    sa.Column("message", postgresql.JSONB, nullable=False),
    sa.Column("waited_at", sa.DateTime(timezone=True), nullable=False),
)
