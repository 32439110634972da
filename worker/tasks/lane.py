"""The batch lane's task and batches: ``lane_tick``, one look at a batch-lane run's jobs (``worker.runs.lane``);
``LaneBatch``, a batch of such a run, which gathers its texts and waits, or writes what came back."""

from __future__ import annotations

from celery import Task

from store.contract import LANE_TICK
from store.state.ledger import Parked
from worker.pipeline.batch import BatchResult
from worker.runs.lane import look, run_lane
from worker.runtime.app import app
from worker.runtime.context import context
from worker.tasks.flow import Batch, Work
from worker.tasks.retries import RETRIED

__all__ = ["LaneBatch", "lane_tick"]


@app.task(bind=True, name=LANE_TICK, **RETRIED)
def lane_tick(self: Task, run_id: str, token: str | None = None) -> None:
    """Look at a batch-lane run's jobs: send what it gathered, read what finished, write what came back."""
    look(run_id, token)


class LaneBatch(Work):
    """A batch of a batch-lane run: while the run gathers, its texts that nothing holds are queued and it waits
    (not counted); sent again to write, it writes like any batch, the lane's vectors used as stored ones."""

    def __init__(self, batch: Batch, *, fresh: bool = False, gathering: bool) -> None:
        super().__init__(batch, fresh=fresh)
        self.gathering = gathering

    def __call__(self) -> dict[str, BatchResult] | None:
        batch, fresh, ctx = self.batch, self.fresh, context()
        assert batch.run_id is not None and batch.number is not None
        lane = run_lane(batch.run_id, gathering=self.gathering, collection=batch.collection)
        ids = batch.ids
        results = ctx.written(batch.collection, ids, lambda jobs: jobs.indexer.index(ids, fresh=fresh, lane=lane))
        if not self.gathering:
            deleted = sum(len(result.deleted) for result in results.values())
            ctx.lane_state().tally(batch.run_id, {"chain": len(lane.elsewhere), "deleted": deleted})
        if not any(result.waiting for result in results.values()):
            return results
        waiting = Parked(
            run_id=batch.run_id,
            batch=batch.number,
            collection=batch.collection,
            ids=list(ids),
            carried=batch.carried,
            fresh=fresh,
        )
        ctx.lane_state().wait(waiting)
        return None
