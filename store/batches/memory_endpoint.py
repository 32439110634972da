"""The reference ``BatchEndpoint``: jobs in this process, answered by a provider's ``embed_batch`` when a test
says so (``finish``), whole, part-way (expired) or with some lines failed."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from store.batches.endpoint import Answer, Job, Request
from store.embeddings.providers.base import Provider

__all__ = ["MemoryEndpoint"]


@dataclass(slots=True)
class _Held:
    job: Job
    tag: str
    requests: list[Request]
    answers: list[Answer] = field(default_factory=list)


class MemoryEndpoint:
    """Jobs held here until ``finish``; every submitted text is kept in ``bought`` (what a provider bills)."""

    def __init__(self, provider: Provider, *, max_requests: int = 50_000, max_bytes: int = 200_000_000) -> None:
        self.provider = provider
        self.max_requests, self.max_bytes = max_requests, max_bytes
        self.bought: list[str] = []
        self._jobs: dict[str, _Held] = {}
        self._ids = itertools.count(1)

    def submit(self, requests: Sequence[Request], *, tag: str) -> Job:
        job = Job(id=f"batch_{next(self._ids)}", status="in_progress", total=len(requests))
        self._jobs[job.id] = _Held(job, tag, list(requests))
        return job

    def find(self, tag: str) -> Job | None:
        found = [held.job for held in self._jobs.values() if held.tag == tag]
        return found[-1] if found else None

    def job(self, job_id: str) -> Job:
        return self._jobs[job_id].job

    def answers(self, job: Job) -> Iterator[Answer]:
        yield from self._jobs[job.id].answers

    def cancel(self, job_id: str) -> Job:
        return self.finish(job_id, done=0, status="cancelled")

    def close(self) -> None:
        return None

    def open(self) -> list[str]:
        """The ids of jobs not finished."""
        return [job_id for job_id, held in self._jobs.items() if not held.job.finished]

    def refuse(self, job_id: str, code: str = "token_limit_exceeded") -> Job:
        """Fail a job at validation, as a provider does (``token_limit_exceeded``: its model's queue is full)."""
        held = self._jobs[job_id]
        held.job = replace(held.job, status="failed", errors=(f"{code}: refused by the memory endpoint",))
        return held.job

    def finish(
        self, job_id: str, *, done: int | None = None, fail: Sequence[int] = (), status: str = "completed"
    ) -> Job:
        """End a job: its first ``done`` lines (all by default) answered, less the line numbers in ``fail``; the
        rest unrun, as an expired or cancelled job leaves them."""
        held = self._jobs[job_id]
        count = len(held.requests) if done is None else done
        for number, request in enumerate(held.requests[:count]):
            if number in fail:
                held.answers.append(Answer(request.custom_id, None, error="500: scripted failure"))
                continue
            vectors = self.provider.embed_batch(list(request.texts))
            self.bought.extend(request.texts)
            tokens = getattr(vectors, "tokens", None) or sum(len(text.split()) for text in request.texts)
            held.answers.append(Answer(request.custom_id, list(vectors), tokens=tokens))
        for request in held.requests[count:]:
            held.answers.append(Answer(request.custom_id, None, error=f"batch_{status}: not run"))
        completed = count - len([n for n in fail if n < count])
        held.job = replace(held.job, status=status, completed=completed, failed=len(held.requests) - completed)
        return held.job
