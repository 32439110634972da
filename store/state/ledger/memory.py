"""The memory ledger: the reference implementation, for one process (tests, in-process runs).

One lock guards everything; writes made through ``Held`` are applied when the
``locked`` block ends without an error, as the PostgreSQL ledger commits them.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime

import store.state.ledger.rules as rules
from store.calls.spend import Spend
from store.errors import ConfigError
from store.state.clock import now
from store.state.generations.memory import MemoryGenerations
from store.state.ledger.base import Failure, Forgotten, LedgerEntry, Overview, Parked, RunProgress, RunStatus

__all__ = ["MemoryLedger"]


@dataclass
class _Run:
    progress: RunProgress
    batches: int | None = None
    counted: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    moved_at: datetime | None = None
    deferred_index: bool = False


class _Held:
    """Writes staged under the lock, applied on a clean exit."""

    def __init__(self, ledger: MemoryLedger, collection: str) -> None:
        self._ledger = ledger
        self._collection = collection
        self.staged: list[Callable[[], None]] = []

    def entries(self, record_ids: Sequence[str]) -> dict[str, LedgerEntry]:
        return self._ledger.entries(self._collection, record_ids)

    def record_indexed(self, entries: Sequence[LedgerEntry]) -> None:
        self.staged.append(lambda: self._ledger._indexed(self._collection, list(entries)))

    def forget(self, record_ids: Sequence[str]) -> None:
        self.staged.append(lambda: self._ledger._forget(self._collection, list(record_ids)))


class MemoryLedger:
    """Entries, runs and failures in dicts; see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._entries: dict[tuple[str, str], LedgerEntry] = {}
        self._runs: dict[str, _Run] = {}
        self._failures: dict[tuple[str, str], Failure] = {}
        self._spend: dict[tuple[str, str, str, int], Spend] = {}
        self._parked: dict[tuple[str, int], Parked] = {}
        #: The aliases of migrated collections, kept with the rest of this process's state.
        self.generations = MemoryGenerations()

    # -- locks and entries -----------------------------------------------------------

    @contextmanager
    def locked(self, collection: str, record_ids: Iterable[str], *, read: bool = False) -> Iterator[_Held]:
        with self._lock:
            held = _Held(self, collection)
            yield held
            for write in held.staged:
                write()

    def entries(self, collection: str, record_ids: Sequence[str]) -> dict[str, LedgerEntry]:
        with self._lock:
            found = (self._entries.get((collection, i)) for i in record_ids)
            return {e.record_id: e for e in found if e is not None}

    def record_ids(self, collection: str) -> set[str]:
        with self._lock:
            return {record_id for name, record_id in self._entries if name == collection}

    def entries_page(self, collection: str, *, after: str | None, limit: int) -> list[LedgerEntry]:
        with self._lock:
            found = [e for (name, i), e in self._entries.items() if name == collection and (after is None or i > after)]
        return sorted(found, key=lambda e: e.record_id)[:limit]

    def models(self, collection: str) -> set[str]:
        with self._lock:
            return {entry.model for (name, _), entry in self._entries.items() if name == collection}

    def forget_collection(self, collection: str) -> Forgotten:
        counts = []
        with self._lock:
            for table in (self._entries, self._failures):
                keys = [k for k in table if k[0] == collection]
                for key in keys:
                    del table[key]
                counts.append(len(keys))
        return Forgotten(*counts)

    def _indexed(self, collection: str, entries: list[LedgerEntry]) -> None:
        for entry in entries:
            key = (collection, entry.record_id)
            known = self._entries.get(key)
            version = rules.kept_version(entry.version, known.version if known is not None else None)
            self._entries[key] = replace(entry, version=version, indexed_at=now())
            self._failures.pop(key, None)

    def _forget(self, collection: str, record_ids: list[str]) -> None:
        for record_id in record_ids:
            self._entries.pop((collection, record_id), None)
            self._failures.pop((collection, record_id), None)

    # -- runs ------------------------------------------------------------------------

    def create_run(
        self, collection: str, *, full: bool = False, run_id: str | None = None, kind: str = "reindex"
    ) -> str:
        started = rules.started_run(collection, run_id=run_id, full=full, kind=kind, at=now())
        with self._lock:
            self._runs.setdefault(started.run_id, _Run(started))
        return started.run_id

    def set_run_total(self, run_id: str, *, total: int, batches: int) -> RunProgress:
        with self._lock:
            run = self._get(run_id)
            run.progress, run.batches = replace(run.progress, total=total), batches
            return self._finish_if_complete(run)

    def finish_batch(self, run_id: str, batch: int, *, done: int, skipped: int, failed: int) -> RunProgress:
        with self._lock:
            run = self._get(run_id)
            if batch not in run.counted:  # each batch counted once
                run.counted[batch], run.moved_at = (done, skipped, failed), now()
            return self._finish_if_complete(run)

    def fail_run(self, run_id: str, error: str) -> None:
        with self._lock:
            run = self._get(run_id)
            run.progress = replace(
                run.progress, status=RunStatus.FAILED, error=rules.kept_error(error), finished_at=now()
            )

    def run(self, run_id: str) -> RunProgress:
        with self._lock:
            run = self._get(run_id)
            return rules.with_tally(
                run.progress, rules.Tally.of(run.counted.values(), run.moved_at), batches=run.batches
            )

    def resolve_run(self, prefix: str) -> str:
        with self._lock:
            return rules.one_run(prefix, [run_id for run_id in self._runs if run_id.startswith(prefix)][:2])

    def recent_runs(self, limit: int = 20, *, running: bool = False) -> list[RunProgress]:
        with self._lock:
            chosen = [r.progress for r in self._runs.values() if not running or r.progress.status == RunStatus.RUNNING]
            return [self.run(r.run_id) for r in rules.newest_first(chosen, limit)]

    def _get(self, run_id: str) -> _Run:
        run = self._runs.get(run_id)
        if run is None:
            raise ConfigError(rules.unknown_run(run_id))
        return run

    def _finish_if_complete(self, run: _Run) -> RunProgress:
        self._move(
            run,
            rules.status_when_counted(
                run.progress.status, expected=run.batches, counted=len(run.counted), deferred=run.deferred_index
            ),
        )
        return self.run(run.progress.run_id)

    @staticmethod
    def _move(run: _Run, status: RunStatus | None) -> None:
        """The run in ``status`` (None: as it is), finished now if that ends it."""
        if status is not None:
            finished_at = rules.ended_at(status, now()) or run.progress.finished_at
            run.progress = replace(run.progress, status=status, finished_at=finished_at)

    def defer_index(self, run_id: str) -> None:
        with self._lock:
            self._get(run_id).deferred_index = True

    def complete_run(self, run_id: str) -> RunProgress:
        with self._lock:
            run = self._get(run_id)
            self._move(run, rules.status_when_index_built(run.progress.status))
            return self.run(run_id)

    # -- budgets ---------------------------------------------------------------------

    def set_caps(self, run_id: str, *, max_tokens: int | None, max_cost: float | None) -> None:
        with self._lock:
            run = self._get(run_id)
            run.progress = replace(run.progress, max_tokens=max_tokens, max_cost=max_cost)

    def set_lane(self, run_id: str, lane: str) -> None:
        with self._lock:
            run = self._get(run_id)
            run.progress = replace(run.progress, lane=lane)

    def pause_run(self, parked: Parked, error: str) -> bool:
        with self._lock:
            run = self._get(parked.run_id)
            if not rules.may_pause(run.progress.status):
                return False
            run.progress = replace(run.progress, status=RunStatus.PAUSED, error=rules.kept_error(error))
            self._park(parked)
            return True

    def park_batch(self, parked: Parked) -> bool:
        with self._lock:
            if self._get(parked.run_id).progress.status != RunStatus.PAUSED:
                return False
            self._park(parked)
            return True

    def _park(self, parked: Parked) -> None:
        self._parked[(parked.run_id, parked.batch)] = replace(parked, parked_at=now())

    def resume_run(self, run_id: str, *, max_tokens: int | None, max_cost: float | None) -> list[Parked]:
        with self._lock:
            run = self._get(run_id)
            refused = rules.not_resumable(run_id, run.progress.status)
            if refused:
                raise ConfigError(refused)
            run.progress = replace(
                run.progress,
                status=RunStatus.RUNNING,
                error="",
                max_tokens=run.progress.max_tokens if max_tokens is None else max_tokens,
                max_cost=run.progress.max_cost if max_cost is None else max_cost,
            )
            return [p for key, p in sorted(self._parked.items()) if key[0] == run_id]

    def unpark(self, parked: Sequence[Parked]) -> None:
        with self._lock:
            for batch in parked:
                key = (batch.run_id, batch.batch)
                if key in self._parked and self._parked[key].parked_at == batch.parked_at:
                    del self._parked[key]

    # -- failures --------------------------------------------------------------------

    def record_failure(self, collection: str, record_id: str, error: str, *, run_id: str | None = None) -> None:
        with self._lock:
            known = self._failures.get((collection, record_id))
            attempts = rules.attempts_after(known.attempts if known is not None else None)
            self._failures[(collection, record_id)] = Failure(
                collection, record_id, rules.kept_error(error), attempts, now()
            )

    def failures(self, collection: str | None = None) -> list[Failure]:
        with self._lock:
            found = [f for f in self._failures.values() if collection is None or f.collection == collection]
        return sorted(found, key=lambda f: (f.collection, f.record_id))

    def add_spend(self, rows: Sequence[Spend]) -> None:
        with self._lock:
            for row in rows:
                found = self._spend.get(row.key)
                self._spend[row.key] = row if found is None else found.plus(row)

    def run_spend(self, run_id: str) -> list[Spend]:
        with self._lock:
            return [self._spend[key] for key in sorted(self._spend) if key[0] == run_id]

    def runs_spend(self, run_ids: Sequence[str]) -> dict[str, list[Spend]]:
        wanted = set(run_ids)
        found: dict[str, list[Spend]] = {}
        with self._lock:
            for key in sorted(self._spend):
                if key[0] in wanted:
                    found.setdefault(key[0], []).append(self._spend[key])
        return found

    def close(self) -> None:
        """Nothing to release."""

    def overview(self) -> Overview:
        with self._lock:
            runs = [r.progress for r in self._runs.values()]
            open_runs = rules.newest_first((r for r in runs if not r.status.ended), rules.MAX_OPEN_RUNS)
            return rules.overview(
                Counter(r.status.value for r in runs),
                [self.run(r.run_id) for r in open_runs],
                Counter(collection for collection, _ in self._failures),
            )
