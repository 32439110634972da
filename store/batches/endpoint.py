"""The seam of a provider's batch endpoint: requests submitted as one job, the job polled, its answers read.

A job is tagged when it is submitted, so a process that died between the provider taking it and the state
database recording it finds it again (``find``) instead of buying the same texts twice.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["FINISHED", "QUEUE_FULL", "Answer", "BatchEndpoint", "Job", "Request"]

#: The states after which a job changes no more.
FINISHED = frozenset({"completed", "failed", "expired", "cancelled"})
#: What a provider says when a model has too many tokens queued in batches: wait for some to finish.
QUEUE_FULL = "token_limit_exceeded"


@dataclass(frozen=True, slots=True)
class Request:
    """One request of a job: texts embedded in one call, answered under ``custom_id``."""

    custom_id: str
    texts: list[str]


@dataclass(frozen=True, slots=True)
class Job:
    """A provider's batch job, as last read: its state (the provider's word), its lines and what it refused."""

    id: str
    status: str
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file: str | None = None
    error_file: str | None = None
    #: Why the provider refused the job at validation, each ``code: message``.
    errors: tuple[str, ...] = field(default=())

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def queue_full(self) -> bool:
        """Refused because the model's queue of batch tokens is full: submitted again once it drains."""
        return self.status == "failed" and any(error.startswith(QUEUE_FULL) for error in self.errors)


@dataclass(frozen=True, slots=True)
class Answer:
    """One request's outcome: its vectors and the tokens its usage reports, or why it failed."""

    custom_id: str
    vectors: list[list[float]] | None
    tokens: int = 0
    error: str | None = None


class BatchEndpoint(Protocol):
    """One embedding model's batch endpoint (``store.batches.openai`` speaks OpenAI's; ``memory`` is the
    reference)."""

    #: The most requests, and bytes of input, one job takes.
    max_requests: int
    max_bytes: int

    def submit(self, requests: Sequence[Request], *, tag: str) -> Job:
        """Upload ``requests`` as one job tagged ``tag``. Raises TransientError, PermanentError."""
        ...

    def find(self, tag: str) -> Job | None:
        """The newest job submitted with ``tag``, if the provider has one."""
        ...

    def job(self, job_id: str) -> Job:
        """The job as it is now."""
        ...

    def answers(self, job: Job) -> Iterator[Answer]:
        """Every answer a finished job holds, from its output and error files; a request it never ran is
        answered with an error (expired or cancelled)."""
        ...

    def cancel(self, job_id: str) -> Job:
        """Ask the provider to stop the job; what it did stays readable."""
        ...

    def close(self) -> None: ...
