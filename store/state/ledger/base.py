"""The ledger seam: what the index holds per record, the write locks, runs and failures.

``MemoryLedger`` is the reference (one process: tests, the in-process test
runner); ``PostgresLedger`` is the production one, shared by every worker.
Writes of one record happen under its lock: ``locked`` yields the records'
``Held`` view, and everything done through it commits together when the
block ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from store.contract import RunStatus

if TYPE_CHECKING:
    from store.calls.spend import Spend
    from store.state.generations.base import Generations

__all__ = [
    "Failure",
    "Forgotten",
    "Held",
    "Ledger",
    "LedgerEntry",
    "Overview",
    "Parked",
    "RunProgress",
    "RunStatus",
]


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """What the index holds for one record: the content hash it was built from.

    ``version`` orders pushed documents (a push older than the entry is dropped);
    ``stamp`` is the source's ``updated_at`` the record was read at, so a
    reconcile sweep can skip rows whose stamp has not moved.
    """

    record_id: str
    content_hash: str
    model: str
    chunks: int
    version: int = 0
    stamp: str = ""
    #: When the ledger wrote the entry (which run or task did is not recorded); not part of its value.
    indexed_at: datetime | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class RunProgress:
    """A reindex run: how many records it has, and how many are done, skipped or failed."""

    run_id: str
    collection: str
    status: RunStatus
    total: int | None
    done: int
    skipped: int
    failed: int
    full: bool
    started_at: datetime
    finished_at: datetime | None
    error: str = ""
    kind: str = "reindex"
    #: When its progress last moved: its last batch counted, else its start.
    moved_at: datetime | None = None
    #: How many batches the run has (None until its fan-out is over), and how many of them are counted.
    batches: int | None = None
    counted: int = 0
    #: The run's own caps (``reindex --max-tokens/--max-cost``, ``runs resume``); None: the collection's.
    max_tokens: int | None = None
    max_cost: float | None = None
    #: Where its embeddings are bought: "sync" (the failover chain, call by call) or "batch" (the provider's
    #: batch endpoint, ``store.batches``).
    lane: str = "sync"

    @property
    def processed(self) -> int:
        return self.done + self.skipped + self.failed


@dataclass(frozen=True, slots=True, kw_only=True)
class Parked:
    """A batch of a paused run put aside, as its ``index_batch`` message held it, until the run is resumed."""

    run_id: str
    batch: int
    collection: str
    ids: list[str]
    carried: dict[str, int] | None = None
    fresh: bool = False
    #: When it was parked: ``unpark`` removes it only if it was not parked again since it was read.
    parked_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Failure:
    """A record that could not be indexed after its retries."""

    collection: str
    record_id: str
    error: str
    attempts: int
    last_seen: datetime


@dataclass(frozen=True, slots=True)
class Overview:
    """The ledger at a glance, for metrics: runs per state, the runs not ended, failed records per collection."""

    #: How many runs are in each state, every state present (0 included).
    runs: dict[RunStatus, int]
    #: The runs running or building their index, newest first, at most ``rules.MAX_OPEN_RUNS``.
    open_runs: list[RunProgress]
    #: Records in the failures table per collection; collections with none are left out.
    failures: dict[str, int]


@dataclass(frozen=True, slots=True)
class Forgotten:
    """What ``forget_collection`` dropped: ledger entries and failures."""

    entries: int
    failures: int


class Held(Protocol):
    """The ledger of records whose locks are held; what is written here commits when the lock is released."""

    def entries(self, record_ids: Sequence[str]) -> dict[str, LedgerEntry]:
        """The entries of these records that exist."""
        ...

    def record_indexed(self, entries: Sequence[LedgerEntry]) -> None:
        """Remember what was indexed (a version never goes back) and clear the records' failures."""
        ...

    def forget(self, record_ids: Sequence[str]) -> None:
        """Drop the entries and failures of records that no longer exist."""
        ...


class Ledger(Protocol):
    """Indexing state of every collection. Raises StoreUnavailable when its database cannot be reached."""

    @property
    def generations(self) -> Generations:
        """Which generation each migrated collection reads and writes (``store.state.generations``), in this state."""
        ...

    # -- locks and entries -----------------------------------------------------------

    def locked(self, collection: str, record_ids: Iterable[str], *, read: bool = False) -> AbstractContextManager[Held]:
        """Hold the write locks of these records until the block ends (taken sorted: no deadlocks). ``read``:
        the caller will ask ``Held.entries`` of them, so a backend may read the rows with the locks."""
        ...

    def entries(self, collection: str, record_ids: Sequence[str]) -> dict[str, LedgerEntry]:
        """The entries of these records that exist, read without their locks."""
        ...

    def record_ids(self, collection: str) -> set[str]:
        """Every record id the collection's ledger holds."""
        ...

    def entries_page(self, collection: str, *, after: str | None, limit: int) -> list[LedgerEntry]:
        """Up to ``limit`` entries of the collection whose ids come after ``after``, by id (None: from the first)."""
        ...

    def models(self, collection: str) -> set[str]:
        """The models the collection's records were last embedded with (``vectorsync migrate`` reads its chain)."""
        ...

    def forget_collection(self, collection: str) -> Forgotten:
        """Drop every entry and failure of ``collection`` (its runs stay, as history); say how many."""
        ...

    # -- runs ------------------------------------------------------------------------

    def create_run(
        self, collection: str, *, full: bool = False, run_id: str | None = None, kind: str = "reindex"
    ) -> str:
        """Insert a running run (idempotent for a given run_id) and return its id; kind: reindex or reconcile."""
        ...

    def set_run_total(self, run_id: str, *, total: int, batches: int) -> RunProgress:
        """Fix how many records and batches the run has; it is done once that many batches are counted."""
        ...

    def finish_batch(self, run_id: str, batch: int, *, done: int, skipped: int, failed: int) -> RunProgress:
        """Count one batch of a run, once, and mark the run done when its last batch is in."""
        ...

    def defer_index(self, run_id: str) -> None:
        """The run loads an empty collection without its vector index: once its records are in, it goes to
        ``indexing`` (not ``done``) until ``complete_run`` says the index is built."""
        ...

    def complete_run(self, run_id: str) -> RunProgress:
        """An ``indexing`` run whose index is built is ``done``."""
        ...

    def fail_run(self, run_id: str, error: str) -> None:
        """End the run as failed with ``error``."""
        ...

    def run(self, run_id: str) -> RunProgress:
        """A run's progress. Raises ConfigError for an unknown run."""
        ...

    def resolve_run(self, prefix: str) -> str:
        """The full id of the one run whose id starts with ``prefix``. Raises ConfigError for none or several."""
        ...

    def recent_runs(self, limit: int = 20, *, running: bool = False) -> list[RunProgress]:
        """The newest runs first; ``running``: only those still ``running``, however old."""
        ...

    # -- budgets -------------------------------------------------------------------------

    def set_caps(self, run_id: str, *, max_tokens: int | None, max_cost: float | None) -> None:
        """Give a run caps of its own (None: that cap is not the run's own). Raises ConfigError for an unknown
        run."""
        ...

    def set_lane(self, run_id: str, lane: str) -> None:
        """Send a run's embeddings through ``lane`` ("sync" or "batch", ``RunProgress.lane``), before its batches go
        out. Raises ConfigError for an unknown run."""
        ...

    def pause_run(self, parked: Parked, error: str) -> bool:
        """Pause a running (or paused) run, saying why in ``error``, and park its batch ``parked``, at once;
        False, and nothing done, when the run is no longer running."""
        ...

    def park_batch(self, parked: Parked) -> bool:
        """Park a batch of a paused run; False, and nothing done, when the run is not paused (resumed since)."""
        ...

    def resume_run(self, run_id: str, *, max_tokens: int | None, max_cost: float | None) -> list[Parked]:
        """A paused run running again, with these caps where not None; its parked batches, kept until
        ``unpark``, so a resume cut short is resumed again. Raises ConfigError for a run that is neither paused
        nor running."""
        ...

    def unpark(self, parked: Sequence[Parked]) -> None:
        """Drop parked batches once sent again; one parked again since it was read is kept."""
        ...

    # -- spend -----------------------------------------------------------------------

    def add_spend(self, rows: Sequence[Spend]) -> None:
        """Add a batch's spend (``store.calls.spend.Tally.rows``) to the sums of each run, collection, model
        and generation: tokens and calls added, cost added where either side has one, the weakest label kept."""
        ...

    def run_spend(self, run_id: str) -> list[Spend]:
        """What a run has spent so far, per collection, model and generation (``LIVE``, "", for live tasks),
        ordered by them. What a budget compares with its cap: sum ``tokens`` and ``cost`` of the rows."""
        ...

    def runs_spend(self, run_ids: Sequence[str]) -> dict[str, list[Spend]]:
        """``run_spend`` of each of ``run_ids`` in one read (``status``'s runs); a run that spent nothing is
        left out."""
        ...

    # -- failures --------------------------------------------------------------------

    def record_failure(self, collection: str, record_id: str, error: str, *, run_id: str | None = None) -> None:
        """Remember that a record could not be indexed (counting the attempts)."""
        ...

    def failures(self, collection: str | None = None) -> list[Failure]:
        """Failed records, of one collection or of all, ordered by collection and id."""
        ...

    def overview(self) -> Overview:
        """Runs per state, the open runs and failed records per collection (what the worker's metrics show).
        Raises StoreUnavailable."""
        ...

    def close(self) -> None: ...
