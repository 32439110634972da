"""The indexing tasks: a record of the live queue, a batch of a run (pooled or not), a pushed document. Each is
idempotent: running one twice, or two at once, leaves the same index.

Payloads are small and JSON-plain: a collection name and record ids (or one pushed document). A batch whose
provider calls keep failing is retried with backoff for the records that failed; after its retries they go to
the failures table, and the rest of the batch is indexed regardless (``worker.tasks.flow``).
"""

from __future__ import annotations

from typing import Any, Unpack

from celery import Task
from celery.exceptions import Reject, Retry

from store.contract import INDEX_BATCH, INDEX_DOCUMENT, INDEX_RECORD, POOL_BATCH, BatchMessage
from store.retrieval.options import refuse_unknown
from worker.pipeline.batch import Document
from worker.runtime.app import app
from worker.runtime.context import context
from worker.tasks.documents import Pushed
from worker.tasks.flow import Batch, Work, process
from worker.tasks.lane import LaneBatch
from worker.tasks.pooled import PoolBatch, PooledBatch
from worker.tasks.retries import RETRIED, again, task_policy

__all__ = ["index_batch", "index_document", "index_record"]


@app.task(bind=True, name=INDEX_RECORD, **RETRIED)
def index_record(self: Task, collection: str, record_id: str) -> dict[str, int]:
    """Bring one record's chunks in line with its source (live queue)."""
    if not self.request.retries:
        context().coalescer.release(collection, str(record_id))
    return process(self, Work(Batch(collection, [str(record_id)])))


@app.task(bind=True, name=INDEX_BATCH, **RETRIED)
def index_batch(self: Task, collection: str, ids: list[str], **message: Unpack[BatchMessage]) -> dict[str, int]:
    """Index a batch of record ids (bulk queue); counted once in its run. ``message``: the run's part of it
    (``BatchMessage``, its defaults applied here). ``pooled``: the run has a leftover pool
    (``worker.pipeline.leftovers``), so the batch makes only full provider calls; batch ``POOL_BATCH`` empties it.
    ``fresh``: the ledger held none of the ids when the fan-out looked, so a first attempt does not read it
    (``Indexer.index``)."""
    refuse_unknown("index_batch", message, BatchMessage.__optional_keys__)
    run_id, batch, pooled = message.get("run_id"), message.get("batch"), message.get("pooled", False)
    work = Batch(collection, [str(i) for i in ids], run_id, batch, message.get("carried"), pooled)
    fresh = message.get("fresh", False) and not again(self)
    lane = message.get("lane")
    if lane is not None and run_id is not None and batch is not None:
        return process(self, LaneBatch(work, fresh=fresh, gathering=lane == "gather"))
    pool = context().leftovers() if pooled and run_id is not None and batch is not None else None
    if pool is None:
        return process(self, Work(work, fresh=fresh))
    if batch == POOL_BATCH:
        return process(self, PoolBatch(work, pool, final=not task_policy(self).may_retry(self.request.retries)))
    return process(self, PooledBatch(work, pool, fresh=fresh))


@app.task(bind=True, name=INDEX_DOCUMENT, **RETRIED)
def index_document(
    self: Task, collection: str, id: str, text: str | None, metadata: dict[str, Any] | None = None, version: int = 0
) -> dict[str, int]:
    """Index a document pushed with its content; ``text=None`` deletes it. Its copy kept in Redis goes once done."""
    work = Pushed(collection, Document(str(id), text or "", metadata or {}, version), deleted=text is None)
    try:
        counts = process(self, work)
    except (Retry, Reject):  # it runs again (a retry, or its message back in the queue): its copy stays kept
        raise
    except Exception:  # no attempt will do better: sending it again from a sweep would fail the same way
        work.settle()
        raise
    work.settle()
    return counts
