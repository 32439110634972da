"""What a batch-lane run holds in the state database: the texts it buys through a provider's batch endpoint (each
once per run and model, by its hash), what came back for each, the provider jobs they went out in, and the run's
batches waiting for them. ``LaneState`` is the seam; ``memory.py`` the reference, ``postgres.py`` the shared one.

A text goes: queued -> claimed by a submission (its line and place in that job's file) -> answered (a vector, or
the error its line got). A submission is recorded before its job is sent and tagged with it, so a process that
dies in between finds the job again by the tag (``BatchEndpoint.find``) and never buys the texts twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple, Protocol

from store.batches.endpoint import FINISHED, Job
from store.state.ledger.base import Parked

__all__ = ["CLAIMED", "OUTCOMES", "Held", "LaneCounts", "LaneState", "Submission"]

#: A submission's status before its job is known to the provider.
CLAIMED = "claimed"
#: What a run counts of the texts and records that went another way than the lane, as ``status`` says each:
#: texts whose line the provider failed; texts of a job that expired or was cancelled before their line ran;
#: texts bought through the chain when their batch wrote (their record changed after they were sent, or the lane
#: held no vector for them); records gone from the source when their batch came to write them.
OUTCOMES = {
    "failed": "texts failed by the provider",
    "unrun": "texts of an expired or cancelled job",
    "chain": "texts bought through the chain when written",
    "deleted": "records deleted meanwhile",
}


@dataclass(frozen=True, slots=True)
class Held:
    """What the lane holds for one text: its vector, or why its line failed; neither while it is still out."""

    vector: list[float] | None = None
    error: str | None = None

    @property
    def answered(self) -> bool:
        return self.vector is not None or self.error is not None


@dataclass(frozen=True, slots=True)
class Submission:
    """One provider job of a run: its tag, the provider's id once known, its state and counts."""

    tag: str
    run_id: str
    model: str
    job_id: str | None
    status: str
    lines: int
    completed: int = 0
    failed: int = 0
    tokens: int = 0
    error: str = ""
    submitted_at: datetime | None = None
    finished_at: datetime | None = None

    @property
    def open(self) -> bool:
        """Still to be sent, or sent and not finished."""
        return self.status not in FINISHED


class LaneCounts(NamedTuple):
    """A run's texts in the lane: waiting to be sent, out at the provider, answered with a vector, failed."""

    queued: int
    out: int
    held: int
    failed: int


class LaneState(Protocol):
    """A batch-lane run's texts, jobs and waiting batches (see the module docstring)."""

    def queue(self, run_id: str, model: str, texts: Mapping[str, str]) -> None:
        """Queue ``texts`` (hash: text) to be bought; a text the run has already is left as it is."""
        ...

    def held(self, run_id: str, model: str, hashes: Sequence[str]) -> dict[str, Held]:
        """What the run holds of each of ``hashes`` it knows."""
        ...

    def unsent(self, run_id: str, model: str, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` queued texts no submission has claimed, as (hash, text), in a stable order."""
        ...

    def claim(self, tag: str, run_id: str, model: str, lines: Sequence[Sequence[str]]) -> None:
        """Record submission ``tag`` (status ``CLAIMED``): each of ``lines`` is one request of its job, the hashes
        of its texts in order."""
        ...

    def lines(self, tag: str) -> list[list[str]]:
        """The hashes of each line of submission ``tag``, in order."""
        ...

    def texts(self, tag: str) -> dict[str, str]:
        """The texts of submission ``tag``, by hash."""
        ...

    def update(self, tag: str, job: Job, *, tokens: int = 0) -> None:
        """Submission ``tag`` as its job is now; ``tokens`` the usage its answers reported, once they are read."""
        ...

    def answer(self, run_id: str, model: str, vectors: Mapping[str, list[float]], errors: Mapping[str, str]) -> None:
        """Hold the vectors that came back, and the errors of the lines that failed, by text hash."""
        ...

    def requeue(self, run_id: str, model: str, hashes: Sequence[str]) -> None:
        """Put ``hashes`` back in the queue, unclaimed and unanswered: a new job will take them."""
        ...

    def submissions(self, run_id: str) -> list[Submission]:
        """The run's submissions, oldest first."""
        ...

    def counts(self, run_id: str) -> LaneCounts: ...

    def ticking(self, run_id: str) -> AbstractContextManager[bool]:
        """Whether this process may look at the run's lane now: one look at a time, the others skip theirs."""
        ...

    def schedule(self, run_id: str, token: str, *, mine: str | None, due: datetime, overdue: datetime) -> bool:
        """Make ``token`` the run's next look, due at ``due``, if the look now scheduled is ``mine`` (the one
        calling), or none is, or it was due before ``overdue`` (its worker died): one chain of looks per run."""
        ...

    def tally(self, run_id: str, counts: Mapping[str, int]) -> None:
        """Add ``counts`` (outcome: how many) to what the run counts of what went another way than the lane
        (``OUTCOMES``)."""
        ...

    def tallies(self, run_id: str) -> dict[str, int]:
        """What the run counted, by outcome (none counted: absent)."""
        ...

    def purge(self, run_id: str) -> None:
        """Forget the run's texts, vectors, waiting batches and looks once it has ended (its jobs stay, for
        ``status``): the texts are copies of the records', which an erasure must not find left behind."""
        ...

    def wait(self, batch: Parked) -> None:
        """Put a batch of the run aside until its texts are answered (idempotent)."""
        ...

    def waiting(self, run_id: str) -> list[Parked]: ...

    def release(self, batches: Sequence[Parked]) -> None:
        """Forget ``batches`` as waiting: they were sent again."""
        ...
