"""What a run sends once it is under way: its batches, its pool batch when due, its index build once done."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, TypedDict, Unpack

from store.broker.queues import sent_headers
from store.contract import BUILD_INDEX, BULK_QUEUE, INDEX_BATCH, POOL_BATCH, REINDEX_ALL, BatchMessage
from store.state.generations import parse_name
from store.state.generations.routing import switch_when_built
from store.state.ledger import RunProgress, RunStatus
from worker.runtime.app import app
from worker.runtime.context import context
from worker.runtime.delivery import send

__all__ = ["ReindexStep", "batch_kwargs", "flush_when_due", "run_finished", "send_batch", "send_build"]


class Flags(TypedDict, total=False):
    """A run's batch as its fan-out or its lane sends it (``BatchMessage``'s ``fresh`` and ``lane``)."""

    fresh: bool
    lane: str | None


def batch_kwargs(run_id: str | None, batch: int | None, carried: dict[str, int] | None, pooled: bool) -> BatchMessage:
    """The keyword arguments of an ``index_batch`` (its run, its number, what earlier attempts counted)."""
    kwargs = BatchMessage(run_id=run_id, batch=batch, carried=carried)
    if pooled:
        kwargs["pooled"] = True
    return kwargs


def send_batch(
    collection: str, ids: list[str], *, run_id: str, batch: int, pooled: bool = False, **flags: Unpack[Flags]
) -> None:
    """Send batch number ``batch`` of a run to the bulk queue; ``fresh``: the ledger held none of ``ids``;
    ``lane``: a batch-lane run's batch, gathering texts ("gather") or writing what came back ("write")."""
    kwargs = batch_kwargs(run_id, batch, None, pooled)
    if flags.get("fresh"):
        kwargs["fresh"] = True
    lane = flags.get("lane")
    if lane is not None:
        kwargs["lane"] = lane
    send(app.tasks[INDEX_BATCH], args=(collection, ids), kwargs=kwargs, queue=BULK_QUEUE, headers=sent_headers())


@dataclass(frozen=True, slots=True)
class ReindexStep:
    """One fan-out step of a reindex run, as its ``reindex_all`` message carries it: the run, whether it drops
    records gone from the source (``full``), whether an empty source may end it, and the cursor the last step
    left (None: the first step)."""

    collection: str
    run_id: str
    full: bool = False
    allow_empty: bool = False
    cursor: dict[str, Any] | None = None

    def kwargs(self) -> dict[str, Any]:
        """The message's keyword arguments, after ``collection``: a retry of this step sends them again."""
        return {"full": self.full, "run_id": self.run_id, "allow_empty": self.allow_empty, "cursor": self.cursor}

    def send_next(self, cursor: dict[str, Any]) -> None:
        """Send the run's next step to the bulk queue, behind the batches this one sent, so a worker takes it
        once they are taken (``worker.runs.fanout``)."""
        kwargs = replace(self, cursor=cursor).kwargs()
        send(app.tasks[REINDEX_ALL], args=(self.collection,), kwargs=kwargs, queue=BULK_QUEUE, headers=sent_headers())


def flush_when_due(collection: str, progress: RunProgress, *, left: bool = False) -> None:
    """Send a pooled run's pool batch once every other batch of it is counted (each of those that sees it so
    sends one: the pool batch takes a second one's claim for nothing, and counts once); and again when a
    batch ``left`` records in the pool of a run that had ended meanwhile (a redelivered batch, run again
    after the pool batch), so that they are indexed all the same."""
    due = (
        progress.status == RunStatus.RUNNING
        and progress.batches is not None
        and progress.counted == progress.batches - 1
    )
    if due or (left and progress.status != RunStatus.RUNNING):
        send_batch(collection, [], run_id=progress.run_id, batch=POOL_BATCH, pooled=True)


def run_finished(collection: str, progress: RunProgress) -> None:
    """A run whose records are all in and whose index was deferred gets the index built, as a task of its own
    (``send_build``); the run says ``indexing`` until then, so ``done`` means searchable at full speed.
    A migration's run that is done switches its collection to the new generation."""
    if progress.status == RunStatus.DONE:
        if parse_name(collection)[1] is not None:  # a generation's run: never switch to one without its index
            context().pipeline(collection).collection.ensure_index()
        switch_when_built(context().ledger.generations, progress)
    elif progress.status == RunStatus.INDEXING:
        send_build(collection, progress.run_id)


def send_build(collection: str, run_id: str, *, started: float | None = None) -> None:
    """Send the task that builds (or waits for) a run's deferred index, with the ordinary time limits: it waits
    in steps shorter than them (``worker.tasks.reindex.build_index``); ``started``: when the run's build began."""
    kwargs = {} if started is None else {"started": started}
    send(app.tasks[BUILD_INDEX], args=(collection, run_id), kwargs=kwargs, queue=BULK_QUEUE, headers=sent_headers())
