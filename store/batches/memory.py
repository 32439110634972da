"""The reference ``LaneState``: everything in this process, behind one lock."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime

from store.batches.endpoint import Job
from store.batches.state import CLAIMED, Held, LaneCounts, Submission
from store.state.clock import now
from store.state.ledger.base import Parked

__all__ = ["MemoryLaneState"]


@dataclass(slots=True)
class _Text:
    text: str
    submission: str | None = None
    vector: list[float] | None = None
    error: str | None = None


class MemoryLaneState:
    """``LaneState`` in memory (tests, and a memory ledger's runs)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._texts: dict[tuple[str, str], dict[str, _Text]] = {}
        self._submissions: dict[str, Submission] = {}
        self._lines: dict[str, list[list[str]]] = {}
        self._waiting: dict[tuple[str, int], Parked] = {}
        self._ticking: dict[str, threading.Lock] = {}
        self._looks: dict[str, tuple[str, datetime]] = {}
        self._tallies: dict[str, dict[str, int]] = {}

    def queue(self, run_id: str, model: str, texts: Mapping[str, str]) -> None:
        with self._lock:
            held = self._texts.setdefault((run_id, model), {})
            for digest, text in texts.items():
                held.setdefault(digest, _Text(text))

    def held(self, run_id: str, model: str, hashes: Sequence[str]) -> dict[str, Held]:
        with self._lock:
            held = self._texts.get((run_id, model), {})
            return {h: Held(held[h].vector, held[h].error) for h in hashes if h in held}

    def unsent(self, run_id: str, model: str, limit: int) -> list[tuple[str, str]]:
        with self._lock:
            held = self._texts.get((run_id, model), {})
            free = sorted(h for h, t in held.items() if t.submission is None and t.vector is None and t.error is None)
            return [(h, held[h].text) for h in free[:limit]]

    def claim(self, tag: str, run_id: str, model: str, lines: Sequence[Sequence[str]]) -> None:
        with self._lock:
            held = self._texts[(run_id, model)]
            for line in lines:
                for digest in line:
                    held[digest].submission = tag
            self._lines[tag] = [list(line) for line in lines]
            self._submissions[tag] = Submission(tag, run_id, model, None, CLAIMED, len(lines), submitted_at=now())

    def lines(self, tag: str) -> list[list[str]]:
        with self._lock:
            return [list(line) for line in self._lines.get(tag, [])]

    def texts(self, tag: str) -> dict[str, str]:
        with self._lock:
            wanted = {h for line in self._lines.get(tag, []) for h in line}
            return {
                h: t.text
                for held in self._texts.values()
                for h, t in held.items()
                if h in wanted and t.submission == tag
            }

    def update(self, tag: str, job: Job, *, tokens: int = 0) -> None:
        with self._lock:
            old = self._submissions[tag]
            self._submissions[tag] = replace(
                old,
                job_id=job.id,
                status=job.status,
                completed=job.completed,
                failed=job.failed,
                tokens=old.tokens + tokens,
                error="; ".join(job.errors),
                finished_at=now() if job.finished and old.finished_at is None else old.finished_at,
            )

    def answer(self, run_id: str, model: str, vectors: Mapping[str, list[float]], errors: Mapping[str, str]) -> None:
        with self._lock:
            held = self._texts.get((run_id, model), {})
            for digest, vector in vectors.items():
                if digest in held:
                    held[digest].vector, held[digest].error = list(vector), None
            for digest, error in errors.items():
                if digest in held and held[digest].vector is None:
                    held[digest].error = error

    def requeue(self, run_id: str, model: str, hashes: Sequence[str]) -> None:
        with self._lock:
            held = self._texts.get((run_id, model), {})
            for digest in hashes:
                if digest in held and held[digest].vector is None:
                    held[digest].submission, held[digest].error = None, None

    def submissions(self, run_id: str) -> list[Submission]:
        with self._lock:
            return [s for s in self._submissions.values() if s.run_id == run_id]

    def counts(self, run_id: str) -> LaneCounts:
        with self._lock:
            texts = [t for (run, _), held in self._texts.items() if run == run_id for t in held.values()]
        return LaneCounts(
            queued=sum(1 for t in texts if t.submission is None and t.vector is None and t.error is None),
            out=sum(1 for t in texts if t.submission is not None and t.vector is None and t.error is None),
            held=sum(1 for t in texts if t.vector is not None),
            failed=sum(1 for t in texts if t.vector is None and t.error is not None),
        )

    @contextmanager
    def ticking(self, run_id: str) -> Iterator[bool]:
        lock = self._ticking.setdefault(run_id, threading.Lock())
        got = lock.acquire(blocking=False)
        try:
            yield got
        finally:
            if got:
                lock.release()

    def schedule(self, run_id: str, token: str, *, mine: str | None, due: datetime, overdue: datetime) -> bool:
        with self._lock:
            now_token, now_due = self._looks.get(run_id, (None, None))
            if now_token is None or now_token == mine or (now_due is not None and now_due < overdue):
                self._looks[run_id] = (token, due)
                return True
            return False

    def tally(self, run_id: str, counts: Mapping[str, int]) -> None:
        with self._lock:
            kept = self._tallies.setdefault(run_id, {})
            for outcome, count in counts.items():
                if count:
                    kept[outcome] = kept.get(outcome, 0) + count

    def tallies(self, run_id: str) -> dict[str, int]:
        with self._lock:
            return dict(self._tallies.get(run_id, {}))

    def purge(self, run_id: str) -> None:
        with self._lock:
            self._texts = {key: held for key, held in self._texts.items() if key[0] != run_id}
            self._waiting = {key: batch for key, batch in self._waiting.items() if key[0] != run_id}
            self._looks.pop(run_id, None)

    def wait(self, batch: Parked) -> None:
        with self._lock:
            self._waiting.setdefault((batch.run_id, batch.batch), replace(batch, parked_at=now()))

    def waiting(self, run_id: str) -> list[Parked]:
        with self._lock:
            return sorted((p for (run, _), p in self._waiting.items() if run == run_id), key=lambda p: p.batch)

    def release(self, batches: Sequence[Parked]) -> None:
        with self._lock:
            for batch in batches:
                self._waiting.pop((batch.run_id, batch.batch), None)
