"""A run's batch lane, as a batch and as the run's tick see it.

``RunLane`` is one batch's view: the vectors its run holds are found like stored ones (``reuse``), and while the
run gathers, the texts nothing holds are queued instead of bought. ``tick`` is the run's: queued texts sent in
jobs cut to the provider's limits, open jobs read, their answers held. Both work on ``LaneState`` and a
``BatchEndpoint`` only, so every step can be run again after a crash and does nothing twice.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from store.batches.endpoint import BatchEndpoint, Job, Request
from store.batches.state import CLAIMED, LaneState, Submission
from store.embeddings.batching import plan_batches
from store.embeddings.embeddings import Reuse
from store.embeddings.providers.base import Limits
from store.vectors.records import text_digest

__all__ = ["RunLane", "cut", "tick"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RunLane:
    """One batch's view of its run's lane: ``gathering``, the models whose texts the run still queues (none for a
    batch sent again once they are answered: it writes, buying what the lane lacks through the chain, those texts
    kept in ``elsewhere``)."""

    state: LaneState
    run_id: str
    gathering: frozenset[str] = frozenset()
    elsewhere: set[str] = field(default_factory=set)

    def gathers(self, model: str) -> bool:
        return model in self.gathering

    def reuse(self, stored: Reuse | None, model: str) -> Reuse:
        """``stored``, then the vectors of ``model`` the run's jobs brought back."""

        def found(texts: list[str]) -> Mapping[str, Sequence[float]]:
            known = dict(stored(texts)) if stored is not None else {}
            by_hash = {text_digest(t): t for t in texts if t not in known}
            for digest, held in self.state.held(self.run_id, model, list(by_hash)).items():
                if held.vector is not None:
                    known[by_hash[digest]] = held.vector
            if not self.gathering:
                self.elsewhere.update(t for t in texts if t not in known)
            return known

        return found

    def queue(self, model: str, texts: Sequence[str]) -> None:
        """Queue ``texts`` to be bought through the lane."""
        self.state.queue(self.run_id, model, {text_digest(t): t for t in texts})


def cut(
    texts: Sequence[tuple[str, str]], *, limits: Limits, model: str, max_requests: int, max_bytes: int
) -> list[list[tuple[str, str]]]:
    """The queued ``texts`` (hash, text) as one job's lines: each line one request within the model's ``limits``,
    the file within ``max_requests`` lines and about ``max_bytes`` bytes (what it leaves goes in the next job)."""
    calls = plan_batches([t for _, t in texts], batch_size=limits.max_inputs, limits=limits, model=model)
    lines: list[list[tuple[str, str]]] = []
    size = 0
    for call in calls[:max_requests]:
        line = [texts[i] for i in call]
        size += len(json.dumps([t for _, t in line])) + 200  # the line's envelope: ids, method, url, model
        if lines and size > max_bytes:
            break
        lines.append(line)
    return lines


def tick(
    state: LaneState,
    endpoint_of: Callable[[str], BatchEndpoint],
    run_id: str,
    *,
    models: Mapping[str, tuple[Limits, str]],
    requeue_failed: bool,
) -> dict[str, int]:
    """One look at run ``run_id``'s lane: jobs claimed but not known sent found or sent, finished jobs read,
    queued texts sent; the tokens the answers read reported, by model. ``models``: each model's (limits, API
    name); ``requeue_failed``: a failed line goes into a new job rather than to the failover chain."""
    tokens: dict[str, int] = {}
    queue_full: set[str] = set()
    for submission in state.submissions(run_id):
        endpoint = endpoint_of(submission.model)
        if submission.status == CLAIMED:
            _send(state, endpoint, submission.tag)
        elif submission.open and submission.job_id is not None:
            job = endpoint.job(submission.job_id)
            if job.finished:
                if job.queue_full:
                    queue_full.add(submission.model)
                tokens[submission.model] = tokens.get(submission.model, 0) + _read(
                    state, endpoint, submission, job, requeue_failed
                )
            else:
                state.update(submission.tag, job)
    for model, (limits, name) in models.items():
        if model not in queue_full:  # a full queue drains before anything more is sent
            _submit_queued(state, endpoint_of(model), run_id, model, limits, name)
    return tokens


def _send(state: LaneState, endpoint: BatchEndpoint, tag: str) -> None:
    """Send submission ``tag``'s job, unless the provider has it already (sent before a crash)."""
    job = endpoint.find(tag)
    if job is None:
        job = endpoint.submit(_requests(state, tag), tag=tag)
    state.update(tag, job)


def _requests(state: LaneState, tag: str) -> list[Request]:
    texts = state.texts(tag)
    return [Request(f"{tag}-{number}", [texts[h] for h in line]) for number, line in enumerate(state.lines(tag))]


def _submit_queued(
    state: LaneState, endpoint: BatchEndpoint, run_id: str, model: str, limits: Limits, name: str
) -> None:
    """Send every queued text of ``model``, in jobs cut to the endpoint's limits."""
    while True:
        queued = state.unsent(run_id, model, endpoint.max_requests * limits.max_inputs)
        if not queued:
            return
        lines = cut(queued, limits=limits, model=name, max_requests=endpoint.max_requests, max_bytes=endpoint.max_bytes)
        tag = f"{run_id}-{len(state.submissions(run_id)) + 1}"
        state.claim(tag, run_id, model, [[h for h, _ in line] for line in lines])
        texts = dict(h_t for line in lines for h_t in line)
        requests = [Request(f"{tag}-{n}", [texts[h] for h, _ in line]) for n, line in enumerate(lines)]
        state.update(tag, endpoint.submit(requests, tag=tag))


def _read(
    state: LaneState,
    endpoint: BatchEndpoint,
    submission: Submission,
    job: Job,
    requeue_failed: bool,
) -> int:
    """Hold a finished job's answers; its failed and unrun lines go to the chain, or back in the queue. The tokens
    its answers' usage reported."""
    tag, run_id, model = submission.tag, submission.run_id, submission.model
    lines = state.lines(tag)
    vectors: dict[str, list[float]] = {}
    errors: dict[str, str] = {}
    tokens = 0
    answered: set[int] = set()
    for answer in endpoint.answers(job):
        number = _line_number(answer.custom_id, tag)
        if number is None or number >= len(lines):
            continue
        answered.add(number)
        line = lines[number]
        if answer.vectors is not None and len(answer.vectors) == len(line):
            vectors.update(zip(line, answer.vectors, strict=True))
            tokens += answer.tokens
        else:
            errors.update(dict.fromkeys(line, answer.error or "the provider answered no vectors for this line"))
    for number, line in enumerate(lines):  # a refused job answers none of its lines
        if number not in answered:
            errors.update(dict.fromkeys(line, f"job {job.id} ended {job.status} without this line"))
    if not job.queue_full:
        unrun = {h for h, error in errors.items() if _unrun(error)}
        state.tally(run_id, {"failed": len(errors) - len(unrun), "unrun": len(unrun)})
    if job.queue_full or requeue_failed:
        state.answer(run_id, model, vectors, {})
        state.requeue(run_id, model, list(errors))
    else:
        state.answer(run_id, model, vectors, errors)
    state.update(tag, job, tokens=tokens)
    return tokens


def _line_number(custom_id: str, tag: str) -> int | None:
    prefix = f"{tag}-"
    if not custom_id.startswith(prefix) or not custom_id[len(prefix) :].isdigit():
        return None
    return int(custom_id[len(prefix) :])


def _unrun(error: str) -> bool:
    """Whether a line's error says it never ran (its job expired or was cancelled), not that it failed."""
    return any(word in error for word in ("batch_expired", "batch_cancelled", "not run", "without this line"))
