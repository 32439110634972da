"""A batch-lane run from the workers' side (``store.batches``, ``docs/batch-lane.md``).

Its batches gather: each queues the texts nothing holds and waits. One look at a time (``look``, the
``lane_tick`` task, one chain of them per run) sends the queued texts in provider jobs once the run has gathered
them all (or a job's worth), reads the jobs that finished, and, once every text is answered, sends the waiting
batches again to write: the same swap under record locks as any batch, each record read again from its
source, so a record changed meanwhile is bought through the chain and one deleted stays deleted.
"""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass
from datetime import timedelta

from store.batches.endpoint import BatchEndpoint
from store.batches.lane import RunLane, tick
from store.batches.models import lane_models
from store.batches.openai import OpenAIBatchEndpoint
from store.batches.state import LaneState
from store.calls.spend import Spend, cost_of
from store.contract import LANE_TICK
from store.embeddings.providers.base import Limits
from store.errors import PermanentError, StoreUnavailable, TransientError
from store.settings import BatchLaneSettings, ModelSettings
from store.state.clock import now
from store.state.generations import parse_name
from store.state.ledger import Parked, RunProgress, RunStatus
from worker.runs.sending import send_batch
from worker.runtime.app import app
from worker.runtime.context import context
from worker.runtime.delivery import send

__all__ = ["LaneModel", "lanes_of", "look", "run_lane", "send_look"]

log = logging.getLogger(__name__)

_endpoints: dict[str, BatchEndpoint] = {}
_endpoints_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class LaneModel:
    """The batch lane of a model a collection's writes embed with: its ``[models.NAME]``, its lane, its limits."""

    name: str
    settings: ModelSettings
    limits: Limits

    @property
    def model(self) -> str:
        return self.settings.model

    @property
    def lane(self) -> BatchLaneSettings:
        assert self.settings.batch is not None
        return self.settings.batch


def lanes_of(collection: str) -> dict[str, LaneModel]:
    """The batch lanes of the models a write of ``collection`` embeds with first, by the name vectors are recorded
    under; a generation whose first model has no ``[batch]`` buys through its chain."""
    ctx, found = context(), {}
    for generation in ctx.router.writing(collection):
        for name, declared in lane_models(ctx.settings, [generation]).items():
            embeddings = ctx.jobs_of(generation).pipeline.embeddings
            found[embeddings.space] = LaneModel(name, declared, embeddings.chain.limits)
    return found


def endpoint_of(lane: LaneModel) -> BatchEndpoint:
    """The batch endpoint of a lane's ``[models.NAME]``, one per process."""
    with _endpoints_lock:
        if lane.name not in _endpoints:
            _endpoints[lane.name] = OpenAIBatchEndpoint(name=lane.name, settings=lane.settings)
        return _endpoints[lane.name]


def run_lane(run_id: str, *, gathering: bool, collection: str) -> RunLane:
    """A batch's view of its run's lane; ``gathering``: it queues texts (else it writes what came back)."""
    models = frozenset(lanes_of(collection)) if gathering else frozenset()
    return RunLane(context().lane_state(), run_id, models)


def send_look(run_id: str, *, token: str | None = None, countdown: float = 0) -> None:
    """Send one look at the run's lane; ``token``: the chain it continues (None: a look that may start one)."""
    send(app.tasks[LANE_TICK], args=(run_id,), kwargs={"token": token}, countdown=countdown)


def look(run_id: str, token: str | None) -> None:
    """One look at the run's lane (see the module docstring); the next look sent when the run goes on and this
    look is its chain's (or no living chain has one)."""
    ctx = context()
    state = ctx.lane_state()
    run = ctx.ledger.run(run_id)
    lanes = lanes_of(run.collection)
    if run.status.ended:
        _close(state, run, lanes)
        return
    first = next(iter(lanes.values()), None)
    try:
        with state.ticking(run_id) as mine:
            if mine:
                _look(state, run, lanes)
    except (TransientError, PermanentError, StoreUnavailable) as exc:  # the provider or a store is down: look again
        log.warning("run %s: its batch lane could not be looked at (%s): looking again later", run_id, exc)
    poll = first.lane.poll_seconds if first is not None else 60.0
    new, at = uuid.uuid4().hex, now()
    due, overdue = at + timedelta(seconds=poll), at - timedelta(seconds=2 * poll)
    if state.schedule(run_id, new, mine=token, due=due, overdue=overdue):
        send_look(run_id, token=new, countdown=poll)


def _look(state: LaneState, run: RunProgress, lanes: dict[str, LaneModel]) -> None:
    waiting = state.waiting(run.run_id)
    gathered = run.batches is not None and run.counted + len(waiting) >= run.batches
    counts = state.counts(run.run_id)
    submissions = state.submissions(run.run_id)
    rules = next(iter(lanes.values())).lane if lanes else None
    if rules is None or (gathered and not submissions and counts.queued < rules.min_inputs):
        _write(state, waiting)  # too few texts to be worth a job: bought through the chain as they are written
        return
    full_job = min(m.lane.max_requests * m.limits.max_inputs for m in lanes.values())
    sending = gathered or counts.queued >= full_job
    models = {space: (m.limits, m.model) for space, m in lanes.items()} if sending else {}
    tokens = tick(
        state,
        lambda space: endpoint_of(lanes[space]),
        run.run_id,
        models=models,
        requeue_failed=rules.on_failure == "batch",
    )
    _spend(run, lanes, tokens)
    _cancel_overdue(state, run.run_id, lanes)
    counts, open_jobs = state.counts(run.run_id), any(s.open for s in state.submissions(run.run_id))
    if gathered and not open_jobs and counts.queued == 0 and counts.out == 0:
        _write(state, state.waiting(run.run_id))


def _write(state: LaneState, waiting: list[Parked]) -> None:
    """Send the waiting batches again, to write what the lane holds; each forgotten once sent."""
    for batch in waiting:
        send_batch(batch.collection, batch.ids, run_id=batch.run_id, batch=batch.batch, fresh=batch.fresh, lane="write")
        state.release([batch])
    if waiting:
        log.info("run %s: %d batches sent again to write what the batch lane bought", waiting[0].run_id, len(waiting))


def _spend(run: RunProgress, lanes: dict[str, LaneModel], tokens: dict[str, int]) -> None:
    """The spend of the jobs read, at the lane's price, from the usage their answers reported."""
    generation = parse_name(run.collection)[1] or 0
    rows = [
        Spend(
            run_id=run.run_id,
            collection=parse_name(run.collection)[0],
            model=lanes[space].model,
            generation=generation,
            tokens=count,
            calls=1,
            cost=cost_of(count, lanes[space].lane.price_per_million_tokens),
            counted_by="provider",
        )
        for space, count in tokens.items()
        if count and space in lanes
    ]
    if rows:
        context().ledger.add_spend(rows)


def _cancel_overdue(state: LaneState, run_id: str, lanes: dict[str, LaneModel]) -> None:
    """Cancel the jobs that have been out longer than their lane's ``max_wait_hours``; the next look reads what
    they did, and their other lines go the way ``on_failure`` says."""
    for submission in state.submissions(run_id):
        lane = lanes.get(submission.model)
        if lane is None or not submission.open or submission.job_id is None or submission.submitted_at is None:
            continue
        if now() - submission.submitted_at > timedelta(hours=lane.lane.max_wait_hours):
            log.warning(
                "run %s: job %s out longer than %s h: cancelled", run_id, submission.job_id, lane.lane.max_wait_hours
            )
            state.update(submission.tag, endpoint_of(lane).cancel(submission.job_id))


def _close(state: LaneState, run: RunProgress, lanes: dict[str, LaneModel]) -> None:
    """An ended run's open jobs cancelled (a failed or cancelled run buys no more), its texts forgotten."""
    for submission in state.submissions(run.run_id):
        lane = lanes.get(submission.model)
        if submission.open and submission.job_id is not None and lane is not None and run.status == RunStatus.FAILED:
            state.update(submission.tag, endpoint_of(lane).cancel(submission.job_id))
    state.purge(run.run_id)
