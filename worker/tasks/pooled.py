"""The batches of a pooled run, as ``worker.tasks.flow.Work``: a batch that fills its last provider call from the
pool, and the pool batch that empties it (``worker.pipeline.leftovers`` says why either counts what it counts)."""

from __future__ import annotations

import contextlib
import logging

from store.contract import POOL_BATCH
from store.errors import StoreUnavailable
from worker.metrics.series import observe_batch
from worker.pipeline.batch import BatchResult
from worker.pipeline.leftovers import LeftoverPool
from worker.runtime.context import Jobs, context
from worker.tasks.flow import Batch, Work

__all__ = ["POOL_OWNER", "WRITE_PAGE", "PoolBatch", "PooledBatch"]

log = logging.getLogger(__name__)

#: The owner of the pool batch's claim: one for every copy of it, so that each takes what another left.
POOL_OWNER = "pool"
#: Records the pool batch writes per step.
WRITE_PAGE = 500


class PooledBatch(Work):
    """A batch of a pooled run, whichever attempt: it fills its last provider call from the pool, leaves what
    still does not fill one there, and counts its own ids alone. What it claimed and could not index goes back
    for the pool batch; when the pool cannot be reached, the claim stays for it."""

    def __init__(self, batch: Batch, pool: LeftoverPool, *, fresh: bool = False) -> None:
        super().__init__(batch, fresh=fresh)
        self.pool, self.owner, self.stayed = pool, str(batch.number), False

    def __call__(self) -> dict[str, BatchResult]:
        batch, pool, run_id = self.batch, self.pool, str(self.batch.run_id)
        try:
            outcomes = context().written(
                batch.collection, batch.ids, lambda jobs: jobs.indexer.index(batch.ids), alone=self._alone
            )
        except BaseException:
            with contextlib.suppress(StoreUnavailable):
                pool.release(run_id, self.owner)  # what it claimed goes back, for another batch to index
            raise
        owned = {physical: result.owned() for physical, result in outcomes.items()}
        claimed = [i for result in outcomes.values() for i in result.claimed]
        if claimed:
            back = [i for _, theirs in owned.values() for i in (*theirs.failed, *theirs.retry)]
            for _, theirs in owned.values():
                observe_batch(batch.collection, theirs)  # written here, counted by their own batches
            try:
                held = pool.settle(run_id, self.owner, [i for i in claimed if i not in back], back)
                self.stayed = self.stayed or held > 0 or bool(back)
            except StoreUnavailable as exc:  # the pool batch takes the claim over and writes it again
                log.warning("batch %s of run %s left its claim to the pool batch (%s)", batch.number, run_id, exc)
                self.stayed = True
        return {physical: own for physical, (own, _) in owned.items()}

    def _alone(self, jobs: Jobs) -> BatchResult:
        leftovers = self.pool.run(str(self.batch.run_id), self.owner)
        return jobs.indexer.index(self.batch.ids, leftovers=leftovers, fresh=self.fresh)

    def left(self) -> bool:
        return self.stayed


class PoolBatch(Work):
    """A pooled run's last batch: write everything its pool and any claim still hold (and the ids of a retry),
    then count. Other batches counted these records already, so its count only moves those that failed from
    done to failed. While records reach the pool meanwhile (a copy of a batch run late), it looks again first."""

    counted_elsewhere = True

    def __init__(self, batch: Batch, pool: LeftoverPool, *, final: bool) -> None:
        run_id = str(batch.run_id)
        todo = sorted({*batch.ids, *pool.take_over(run_id, POOL_OWNER)})
        super().__init__(Batch(batch.collection, todo, run_id, POOL_BATCH, batch.carried, pooled=True))
        self.pool, self.final = pool, final

    def __call__(self) -> dict[str, BatchResult]:
        run_id, todo = str(self.batch.run_id), self.batch.ids
        outcomes = context().written(self.batch.collection, todo, self._in_pages)
        again = set() if self.final else {i for result in outcomes.values() for i in result.retry}
        self.pool.settle(run_id, POOL_OWNER, [i for i in todo if i not in again])  # a retry's records stay claimed
        return outcomes

    def _in_pages(self, jobs: Jobs) -> BatchResult:
        result, todo = BatchResult(), self.batch.ids
        for start in range(0, len(todo), WRITE_PAGE):
            result.add(jobs.indexer.index(todo[start : start + WRITE_PAGE]))
        return result

    def ready_to_count(self) -> bool:
        return not self.pool.others(str(self.batch.run_id), POOL_OWNER)
