"""Every statement of the PostgreSQL ledger, in one place, named; values always travel as parameters.

Two kinds: psycopg text (``%(name)s``), for what ``PostgresLedger`` pipelines on the driver's own cursors (the
record locks, a batch counted); and SQLAlchemy statements with bound parameters for the rest. A run's id is
bound as ``:run`` (``run_id`` is a column an UPDATE could set). The tables are ``store.state.tables``.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from store.contract import RunStatus
from store.state.tables import failures, ledger, parked_batches, run_batches, runs, spend

__all__ = [
    "ADD_SPEND",
    "COUNTED_BATCHES",
    "COUNT_BATCH",
    "CREATE_RUN",
    "DEFER_INDEX",
    "ENTRIES",
    "ENTRIES_AFTER",
    "ENTRIES_PAGE",
    "FAILURES",
    "FAILURES_OF",
    "FAILURES_PER_COLLECTION",
    "FAIL_RUN",
    "FORGET",
    "FORGET_COLLECTION",
    "LOCK_RECORDS",
    "LOCK_RUN",
    "LOCK_RUN_STATUS",
    "MODELS",
    "MOVE_RUN",
    "OPEN_RUNS",
    "PARKED",
    "PARK_BATCH",
    "PAUSE_RUN",
    "READ_LOCKED",
    "RECENT_RUNS",
    "RECORD_FAILURE",
    "RECORD_IDS",
    "RECORD_INDEXED",
    "RESUME_RUN",
    "RUN",
    "RUNS_IN_STATUS",
    "RUNS_PER_STATUS",
    "RUNS_SPEND",
    "RUNS_STARTING",
    "RUN_SPEND",
    "SET_CAPS",
    "SET_LANE",
    "SET_RUN_TOTAL",
    "UNPARK",
    "prefix_pattern",
]

# -- locks and entries (psycopg text, pipelined) ---------------------------------------------------------------

#: Takes the write lock of each record id in ``ids`` (a sorted array), one statement for all of them, in the
#: array's order (unnest keeps it).
LOCK_RECORDS = (
    "SELECT count(pg_advisory_xact_lock(hashtextextended(%(collection)s || '/' || id, 0))) "
    "FROM unnest(%(ids)s::text[]) AS id"
)
#: The ledger rows of ``ids``, sent after ``LOCK_RECORDS`` in the same round trip: a statement sees what was
#: committed when it started, so rows read by the locking statement itself could be older than the lock's last
#: holder left them (READ COMMITTED takes its snapshot before the first lock is granted).
READ_LOCKED = (
    "SELECT record_id, content_hash, model, chunks, version, stamp FROM vectorsync_ledger "
    "WHERE collection = %(collection)s AND record_id = ANY(%(ids)s::text[])"
)

# -- entries ---------------------------------------------------------------------------------------------------

#: The entries of ``:ids`` in ``:collection``.
ENTRIES = sa.select(ledger).where(
    ledger.c.collection == sa.bindparam("collection"), ledger.c.record_id.in_(sa.bindparam("ids", expanding=True))
)
#: A page of a collection's entries by id: the first, and the one after the id ``after``.
ENTRIES_PAGE = (
    sa.select(ledger)
    .where(ledger.c.collection == sa.bindparam("collection"))
    .order_by(ledger.c.record_id)
    .limit(sa.bindparam("limit"))
)
ENTRIES_AFTER = ENTRIES_PAGE.where(ledger.c.record_id > sa.bindparam("after"))
RECORD_IDS = sa.select(ledger.c.record_id).where(ledger.c.collection == sa.bindparam("collection"))
MODELS = sa.select(ledger.c.model).where(ledger.c.collection == sa.bindparam("collection")).distinct()
#: Every entry of a batch in one statement over arrays: the rows upserted (a version never goes back:
#: ``rules.kept_version``) and the records' failures cleared, whatever the batch's size (one cached statement,
#: not a VALUES list per size).
RECORD_INDEXED = sa.text("""
WITH rows AS (
    SELECT * FROM unnest(CAST(:ids AS text[]), CAST(:hashes AS text[]), CAST(:models AS text[]),
                         CAST(:chunks AS integer[]), CAST(:versions AS bigint[]), CAST(:stamps AS text[]))
        AS r(record_id, content_hash, model, chunks, version, stamp)
), cleared AS (
    DELETE FROM vectorsync_failures AS f USING rows
    WHERE f.collection = :collection AND f.record_id = rows.record_id
)
INSERT INTO vectorsync_ledger (collection, record_id, content_hash, model, chunks, version, stamp, indexed_at)
SELECT :collection, record_id, content_hash, model, chunks, version, stamp, :at FROM rows
ON CONFLICT (collection, record_id) DO UPDATE SET
    content_hash = excluded.content_hash, model = excluded.model, chunks = excluded.chunks,
    stamp = excluded.stamp, indexed_at = excluded.indexed_at,
    version = greatest(vectorsync_ledger.version, excluded.version)
""")
#: The entries and the failures of ``:ids`` in ``:collection``, dropped.
FORGET = tuple(
    sa.delete(table).where(
        table.c.collection == sa.bindparam("collection"), table.c.record_id.in_(sa.bindparam("ids", expanding=True))
    )
    for table in (ledger, failures)
)
#: Every entry, then every failure, of ``:collection`` dropped (each statement's rowcount says how many).
FORGET_COLLECTION = tuple(
    sa.delete(table).where(table.c.collection == sa.bindparam("collection")) for table in (ledger, failures)
)

# -- runs ------------------------------------------------------------------------------------------------------

#: A run inserted from its columns, given as parameters; nothing when its id is known (idempotent).
CREATE_RUN = postgresql.insert(runs).on_conflict_do_nothing(index_elements=["run_id"])
SET_RUN_TOTAL = (
    sa.update(runs)
    .where(runs.c.run_id == sa.bindparam("run"))
    .values(total=sa.bindparam("total"), batches=sa.bindparam("batches"))
)
DEFER_INDEX = sa.update(runs).where(runs.c.run_id == sa.bindparam("run")).values(deferred_index=True)
#: The run in ``:status``; its ``finished_at`` set when ``:finished_at`` is not NULL, else kept.
MOVE_RUN = (
    sa.update(runs)
    .where(runs.c.run_id == sa.bindparam("run"))
    .values(
        status=sa.bindparam("status"),
        finished_at=sa.func.coalesce(sa.bindparam("finished_at", type_=runs.c.finished_at.type), runs.c.finished_at),
    )
)
FAIL_RUN = (
    sa.update(runs)
    .where(runs.c.run_id == sa.bindparam("run"))
    .values(status=RunStatus.FAILED.value, error=sa.bindparam("error"), finished_at=sa.bindparam("finished_at"))
)
#: A run's status, its row locked (psycopg text: ``finish_batch`` pipelines it, ``complete_run`` sends it).
LOCK_RUN = "SELECT status, batches, deferred_index FROM vectorsync_runs WHERE run_id = %(run_id)s FOR UPDATE"
#: A batch of a run counted once (its primary key), and how many of the run's batches are counted.
COUNT_BATCH = (
    "INSERT INTO vectorsync_run_batches (run_id, batch, done, skipped, failed) "
    "VALUES (%(run_id)s, %(batch)s, %(done)s, %(skipped)s, %(failed)s) ON CONFLICT DO NOTHING"
)
COUNTED_BATCHES = "SELECT count(*) FROM vectorsync_run_batches WHERE run_id = %(run_id)s"

_sums = (
    sa.select(
        sa.func.coalesce(sa.func.sum(run_batches.c.done), 0).label("done"),
        sa.func.coalesce(sa.func.sum(run_batches.c.skipped), 0).label("skipped"),
        sa.func.coalesce(sa.func.sum(run_batches.c.failed), 0).label("failed"),
        sa.func.max(run_batches.c.counted_at).label("moved_at"),
        sa.func.count().label("counted"),
    )
    .where(run_batches.c.run_id == sa.bindparam("run"))
    .subquery()
)
#: The row of ``:run`` and its batches' sums, in one statement.
RUN = sa.select(runs, _sums).select_from(runs.join(_sums, sa.true())).where(runs.c.run_id == sa.bindparam("run"))
#: At most two run ids matching ``:pattern`` (``prefix_pattern``): one is the answer, two are ambiguous.
RUNS_STARTING = sa.select(runs.c.run_id).where(runs.c.run_id.like(sa.bindparam("pattern"), escape="/")).limit(2)
#: The ids of the ``:limit`` newest runs, of any status or of ``:status``.
RECENT_RUNS = sa.select(runs.c.run_id).order_by(runs.c.started_at.desc()).limit(sa.bindparam("limit"))
RUNS_IN_STATUS = RECENT_RUNS.where(runs.c.status == sa.bindparam("status"))


def prefix_pattern(prefix: str) -> str:
    """The LIKE pattern of the ids starting with ``prefix``, its ``%``, ``_`` and ``/`` matched as written."""
    return prefix.replace("/", "//").replace("%", "/%").replace("_", "/_") + "%"


# -- failures and the overview ---------------------------------------------------------------------------------

#: A record's failure upserted from its columns (``attempts`` 1); a known one gets one more attempt
#: (``rules.attempts_after``) and the newest error, run and time.
_failure = postgresql.insert(failures)
RECORD_FAILURE = _failure.on_conflict_do_update(
    index_elements=["collection", "record_id"],
    set_={
        "error": _failure.excluded.error,
        "run_id": _failure.excluded.run_id,
        "last_seen": _failure.excluded.last_seen,
        "attempts": failures.c.attempts + 1,
    },
)
FAILURES = sa.select(failures).order_by(failures.c.collection, failures.c.record_id)
FAILURES_OF = FAILURES.where(failures.c.collection == sa.bindparam("collection"))
RUNS_PER_STATUS = sa.select(runs.c.status, sa.func.count()).group_by(runs.c.status)
#: The ids of the ``:limit`` newest runs not ended.
OPEN_RUNS = (
    sa.select(runs.c.run_id)
    .where(runs.c.status.not_in([s.value for s in RunStatus if s.ended]))
    .order_by(runs.c.started_at.desc())
    .limit(sa.bindparam("limit"))
)
FAILURES_PER_COLLECTION = sa.select(failures.c.collection, sa.func.count()).group_by(failures.c.collection)

_spend = postgresql.insert(spend)
# A sum keeps the weakest label (store.calls.spend.weakest): an estimate in it makes it one.
_WEAKEST = sa.case(
    (sa.or_(spend.c.counted_by == "estimate", _spend.excluded.counted_by == "estimate"), "estimate"),
    (sa.or_(spend.c.counted_by == "tokenizer", _spend.excluded.counted_by == "tokenizer"), "tokenizer"),
    else_="provider",
)
ADD_SPEND = _spend.on_conflict_do_update(
    index_elements=["run_id", "collection", "model", "generation"],
    set_={
        "tokens": spend.c.tokens + _spend.excluded.tokens,
        "calls": spend.c.calls + _spend.excluded.calls,
        # NULL + x is NULL: a cost stays NULL only when neither side has one.
        "cost": sa.case(
            (sa.and_(spend.c.cost.is_(None), _spend.excluded.cost.is_(None)), None),
            else_=sa.func.coalesce(spend.c.cost, 0) + sa.func.coalesce(_spend.excluded.cost, 0),
        ),
        "counted_by": _WEAKEST,
        "updated_at": sa.func.now(),
    },
)
RUN_SPEND = (
    sa.select(spend)
    .where(spend.c.run_id == sa.bindparam("run"))
    .order_by(spend.c.collection, spend.c.model, spend.c.generation)
)
RUNS_SPEND = (
    sa.select(spend)
    .where(spend.c.run_id.in_(sa.bindparam("runs", expanding=True)))
    .order_by(spend.c.run_id, spend.c.collection, spend.c.model, spend.c.generation)
)

# -- budgets ---------------------------------------------------------------------------------------------------

#: A run's status, its row locked: pausing, parking and resuming are serialized on it.
LOCK_RUN_STATUS = sa.select(runs.c.status).where(runs.c.run_id == sa.bindparam("run")).with_for_update()
SET_CAPS = (
    sa.update(runs)
    .where(runs.c.run_id == sa.bindparam("run"))
    .values(max_tokens=sa.bindparam("max_tokens"), max_cost=sa.bindparam("max_cost"))
)
PAUSE_RUN = (
    sa.update(runs)
    .where(runs.c.run_id == sa.bindparam("run"))
    .values(status=RunStatus.PAUSED.value, error=sa.bindparam("error"))
)
_park = postgresql.insert(parked_batches)
#: A batch parked, or parked again (a new ``parked_at``: a resume reading the old one keeps it).
PARK_BATCH = _park.on_conflict_do_update(
    index_elements=["run_id", "batch"],
    set_={name: _park.excluded[name] for name in ("collection", "ids", "carried", "fresh", "parked_at")},
)
RESUME_RUN = (
    sa.update(runs)
    .where(runs.c.run_id == sa.bindparam("run"))
    .values(
        status=RunStatus.RUNNING.value,
        error="",
        max_tokens=sa.func.coalesce(sa.bindparam("max_tokens", type_=sa.BigInteger), runs.c.max_tokens),
        max_cost=sa.func.coalesce(sa.bindparam("max_cost", type_=sa.Float), runs.c.max_cost),
    )
)
PARKED = (
    sa.select(parked_batches).where(parked_batches.c.run_id == sa.bindparam("run")).order_by(parked_batches.c.batch)
)
UNPARK = sa.delete(parked_batches).where(
    parked_batches.c.run_id == sa.bindparam("run_id"),
    parked_batches.c.batch == sa.bindparam("batch"),
    parked_batches.c.parked_at == sa.bindparam("parked_at"),
)
#: Run ``:run``'s lane, ``:lane``.
SET_LANE = sa.update(runs).where(runs.c.run_id == sa.bindparam("run")).values(lane=sa.bindparam("lane"))
