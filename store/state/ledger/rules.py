"""The ledger's decisions as pure functions, so that the memory and the PostgreSQL ledger take each the same way
and each rule is tested alone (as ``worker/tasks/policy.py`` does for the worker's).

Two rules run inside PostgreSQL's upserts, where they must be atomic: ``kept_version`` and ``attempts_after``
(``statements.RECORD_INDEXED`` and ``statements.RECORD_FAILURE``); the ledger contract keeps both in step.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from store.contract import RunStatus
from store.errors import ConfigError
from store.state.ledger.base import Overview, RunProgress
from store.vectors.records import QUOTED_ID_CHARS, escape_unstorable

__all__ = [
    "MAX_ERROR_CHARS",
    "MAX_KEPT_ID_BYTES",
    "MAX_OPEN_RUNS",
    "Tally",
    "attempts_after",
    "ended_at",
    "kept_error",
    "kept_record_id",
    "kept_version",
    "may_pause",
    "newest_first",
    "not_resumable",
    "one_run",
    "overview",
    "started_run",
    "status_when_counted",
    "status_when_index_built",
    "unknown_run",
    "with_tally",
]

#: Longest error text kept per failure and per failed run.
MAX_ERROR_CHARS = 2000
#: The most UTF-8 bytes of a failed record's id kept whole: any id ``limits.max_id_chars`` allows by default (512
#: characters of up to 4 bytes). PostgreSQL's btree refuses a key over 2704 bytes (the failures row's primary key).
MAX_KEPT_ID_BYTES = 2048
#: The most open runs an ``Overview`` lists (the newest): runs that never ended must not make a scrape slow.
MAX_OPEN_RUNS = 100


# -- runs ----------------------------------------------------------------------------


def started_run(collection: str, *, run_id: str | None, full: bool, kind: str, at: datetime) -> RunProgress:
    """A new run: running, nothing counted, its id ``run_id`` or a fresh one."""
    return RunProgress(
        run_id=run_id or uuid.uuid4().hex,
        collection=collection,
        status=RunStatus.RUNNING,
        total=None,
        done=0,
        skipped=0,
        failed=0,
        full=full,
        started_at=at,
        finished_at=None,
        kind=kind,
    )


def status_when_counted(status: RunStatus, *, expected: int | None, counted: int, deferred: bool) -> RunStatus | None:
    """The status a run moves to once ``counted`` of its ``expected`` batches are counted: INDEXING when its
    vector index build was deferred (the bulk path builds it next), DONE otherwise. None while batches are
    still to come, the number of batches is not known yet, or the run is no longer running (a failed run
    stays failed; a run already INDEXING waits for ``complete_run``)."""
    if status != RunStatus.RUNNING or expected is None or counted < expected:
        return None
    return RunStatus.INDEXING if deferred else RunStatus.DONE


def status_when_index_built(status: RunStatus) -> RunStatus | None:
    """An INDEXING run whose index is built is DONE; any other run stays as it is (None)."""
    return RunStatus.DONE if status == RunStatus.INDEXING else None


def ended_at(status: RunStatus, at: datetime) -> datetime | None:
    """When a run that moves to ``status`` at ``at`` finished: ``at`` if the status ends it, else None (its
    ``finished_at`` stays as it was)."""
    return at if status.ended else None


def may_pause(status: RunStatus) -> bool:
    """A run pauses only while it is running (or paused already: another batch hit the cap too)."""
    return status in (RunStatus.RUNNING, RunStatus.PAUSED)


def not_resumable(run_id: str, status: RunStatus) -> str | None:
    """Why the run cannot be resumed, or None: a paused run, or a running one whose resume was cut short."""
    if status in (RunStatus.PAUSED, RunStatus.RUNNING):
        return None
    return f"run {run_id} is {status}, not paused: only a paused run is resumed (`vectorsync status` lists runs)"


def unknown_run(run_id: str) -> str:
    return f"no reindex run {run_id!r}: `vectorsync status` lists the runs"


def one_run(prefix: str, found: Sequence[str]) -> str:
    """The one run id among ``found`` that starts with ``prefix``; ConfigError when none or several do."""
    if prefix in found:
        return prefix
    if not found:
        raise ConfigError(unknown_run(prefix))
    if len(found) > 1:
        raise ConfigError(f"run id {prefix!r} is ambiguous: give more of it (`vectorsync status` lists the runs)")
    return found[0]


# -- progress and the overview -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tally:
    """A run's counted batches: their sums, how many, and when the last was counted (None: none yet)."""

    done: int = 0
    skipped: int = 0
    failed: int = 0
    counted: int = 0
    moved_at: datetime | None = None

    @classmethod
    def of(cls, batches: Iterable[tuple[int, int, int]], moved_at: datetime | None) -> Tally:
        """The tally of batches counted as ``(done, skipped, failed)``."""
        counts = list(batches)
        done, skipped, failed = (sum(c[i] for c in counts) for i in range(3))
        return cls(done, skipped, failed, len(counts), moved_at)


def with_tally(run: RunProgress, tally: Tally, *, batches: int | None) -> RunProgress:
    """The run's progress: the sums over its counted batches, of its ``batches``; it last moved when its last
    batch was counted, else when it started."""
    return replace(
        run,
        done=tally.done,
        skipped=tally.skipped,
        failed=tally.failed,
        moved_at=tally.moved_at or run.started_at,
        batches=batches,
        counted=tally.counted,
    )


def newest_first(runs: Iterable[RunProgress], limit: int) -> list[RunProgress]:
    """At most ``limit`` of ``runs``, the most recently started first."""
    return sorted(runs, key=lambda r: r.started_at, reverse=True)[:limit]


def overview(
    run_counts: Mapping[str, int], open_runs: Sequence[RunProgress], failure_counts: Mapping[str, int]
) -> Overview:
    """The overview from runs counted per status value and failures per collection: every status present
    (0 included), at most ``MAX_OPEN_RUNS`` open runs, collections without failures left out."""
    return Overview(
        runs={status: int(run_counts.get(status.value, 0)) for status in RunStatus},
        open_runs=list(open_runs[:MAX_OPEN_RUNS]),
        failures={str(c): int(n) for c, n in failure_counts.items() if n},
    )


# -- entries and failures ------------------------------------------------------------


def kept_version(new: int, known: int | None) -> int:
    """The version an entry keeps when ``new`` is written over ``known``: a version never goes back."""
    return new if known is None else max(new, known)


def attempts_after(known: int | None) -> int:
    """A record's attempts once it failed again: one more than ``known``, 1 the first time."""
    return 1 if known is None else known + 1


def kept_error(error: str) -> str:
    """The part of an error text the ledger keeps: its first ``MAX_ERROR_CHARS`` characters."""
    return error[:MAX_ERROR_CHARS]


def kept_record_id(record_id: str) -> str:
    """A failed record's id as the PostgreSQL ledger's failures row keeps it, so that every failure gets its row.

    Text PostgreSQL cannot hold is escaped (``escape_unstorable``: a NUL as ``\\x00``, a lone surrogate as
    ``\\ud800``), which tells the id as ``repr`` does; an id still over ``MAX_KEPT_ID_BYTES`` (a loader's, refused
    for its length) is kept as its beginning, its length and the sha256 of the whole id, which keeps two long ids
    apart. Either form is what ``vectorsync failures`` shows; neither is an id a source holds, so a retry of it finds
    no record (the source's id must be fixed first). The memory ledger holds any text, and keeps the id as it is.
    """
    escaped = escape_unstorable(record_id)
    if len(escaped.encode()) <= MAX_KEPT_ID_BYTES:
        return escaped
    digest = hashlib.sha256(record_id.encode("utf-8", "surrogatepass")).hexdigest()
    beginning = escape_unstorable(record_id[:QUOTED_ID_CHARS])
    return f"{beginning}... ({len(record_id)} characters, sha256 {digest})"
