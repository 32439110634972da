"""Run an app's vectorsync tasks inside its own tests: no broker, no database, no worker process.

    from producer import index_document, testing
    from store.query import search

    with testing.queue() as tasks:          # the app's [collections]; a memory store and ledger; fake embeddings
        index_document("uploads", "doc-7", "Dana asked to move the onboarding call")
        tasks.run_queue()                   # the worker's own tasks, and the tasks they send in turn
        assert search("uploads", "onboarding call")[0].metadata["record_id"] == "doc-7"

The producer sends tasks by name (Celery's ``send_task``), which Celery's eager mode never runs: this
module takes the sends instead, through JSON as a broker would, and runs them with the worker's task code
(``worker.tasks``, the pipeline). The worker is imported inside ``queue()`` only, so importing this
module stays as light as importing ``producer``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from celery.exceptions import Reject, Retry
from kombu import serialization

from store.broker.producer import Producer
from store.client import Client, Hooks
from store.errors import ConfigError, VectorsyncError
from store.process.defaults import use_client
from store.settings import CacheSettings, FlowerSettings, Settings, StateSettings, load_settings
from store.state.ledger import Ledger, MemoryLedger
from store.vectors.base import VectorStore

__all__ = ["MEMORY_BROKER", "SentTask", "TaskQueue", "memory_settings", "queue"]

#: The broker URL of in-process settings: nothing connects to it (and no Redis is used for coalescing).
MEMORY_BROKER = "memory://"
#: How many tasks ``run_queue`` runs at most before it decides the queue will not drain.
MAX_TASKS = 10_000


@dataclass(frozen=True, slots=True)
class SentTask:
    """One task as a worker receives it: its name and its arguments after a trip through JSON."""

    name: str
    args: list[Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    queue: str | None = None
    #: How many times this task was retried before (what ``task.request.retries`` says when it runs).
    retries: int = 0


def memory_settings(settings: Settings | Mapping[str, Any] | None = None) -> Settings:
    """``settings`` (default: ``load_settings()``, the app's vectorsync.toml) with everything outside the
    process replaced: the memory store, fake embeddings without a cache, no broker, no coalescing, no chat
    or rerank model. The collections (sources, chunkers, indexed fields), limits and worker settings stay."""
    if settings is None:
        base = load_settings()
    elif isinstance(settings, Settings):
        base = settings
    else:
        base = Settings.model_validate(dict(settings))
    return base.model_copy(
        update={
            "broker": base.broker.model_copy(update={"url": MEMORY_BROKER, "coalesce_seconds": 0}),
            "state": StateSettings(),
            "cache": CacheSettings(),
            "flower": FlowerSettings(),
            "models": {},
            "embeddings": base.embeddings.model_copy(update={"chain": [], "cache_ttl_days": 0}),
            "retrieval": base.retrieval.model_copy(update={"rerank": [], "answer": []}),
            "vectors": base.vectors.model_copy(update={"store": "memory", "url": None, "key": None}),
        }
    )


class TaskQueue:
    """The tasks sent while ``queue()`` is open, held here until ``run_pending`` or ``run_queue`` runs them.

    ``store``, ``ledger`` and ``producer`` are what the tasks and the app's calls use: a memory store with
    fake embeddings, a memory ledger, and a producer that sends here.
    """

    def __init__(self, settings: Settings) -> None:
        from worker.runtime.context import WorkerContext

        self.settings = settings
        self._pending: deque[SentTask] = deque()
        #: Every task run so far, in order.
        self.done: list[SentTask] = []
        #: What the app's calls and the tasks both use: memory parts, and a producer that sends here.
        self.client = Client(settings, ledger=MemoryLedger(), hooks=Hooks(send=self.send_task))
        self.context = WorkerContext.of(self.client)

    @property
    def producer(self) -> Producer:
        return self.client.producer

    @property
    def store(self) -> VectorStore:
        return self.context.store

    @property
    def ledger(self) -> Ledger:
        return self.context.ledger

    @property
    def pending(self) -> list[SentTask]:
        """The tasks sent and not yet run, oldest first."""
        return list(self._pending)

    def send_task(
        self, name: str, args: Any = None, kwargs: Any = None, *, queue: str | None = None, **options: Any
    ) -> None:
        """Celery's ``send_task``, into memory. The arguments go through JSON, as on a broker: what cannot be
        sent there (an object, a numpy array) fails here too, with kombu's EncodeError."""
        self._enqueue(name, args, kwargs, queue=queue)

    def _enqueue(self, name: str, args: Any, kwargs: Any, *, queue: str | None, retries: int = 0) -> None:
        content_type, encoding, body = serialization.dumps([list(args or ()), dict(kwargs or {})], serializer="json")
        sent_args, sent_kwargs = serialization.loads(body, content_type, encoding, accept=[content_type])
        self._pending.append(SentTask(name, sent_args, sent_kwargs, queue, retries))

    def run_pending(self) -> int:
        """Run the tasks pending now, oldest first; the tasks they send, the retries they ask for and those
        rejected with requeue wait for the next call. Returns how many ran. A task's error is raised here, where
        a worker logs it."""
        count = len(self._pending)
        for _ in range(count):
            self._run(self._pending.popleft())
        return count

    def run_queue(self, *, max_tasks: int = MAX_TASKS) -> int:
        """Run tasks until none is pending, including those the tasks send (a reindex's batches). Returns
        how many ran; raises VectorsyncError when ``max_tasks`` ran and the queue is still not empty."""
        ran = 0
        while self._pending:
            if ran >= max_tasks:
                raise VectorsyncError(
                    f"the queue still holds {len(self._pending)} tasks after {ran} ran (next: "
                    f"{self._pending[0].name}): a task keeps sending tasks; pass a larger max_tasks if this is "
                    "expected"
                )
            self._run(self._pending.popleft())
            ran += 1
        return ran

    def _run(self, sent: SentTask) -> None:
        from worker.runtime.app import app

        task = app.tasks.get(sent.name)
        if task is None:
            raise ConfigError(f"no vectorsync task is named {sent.name!r}: send the names in store.contract")
        self.done.append(sent)
        try:  # the worker's own code, in this process
            outcome = task.apply(args=sent.args, kwargs=sent.kwargs, retries=sent.retries, throw=True)
        except Retry as retry:  # back at the end of the queue, as a broker redelivers it (no countdown)
            if retry.sig is None:
                raise
            self._enqueue(sent.name, retry.sig.args, retry.sig.kwargs, queue=sent.queue, retries=sent.retries + 1)
            return
        rejected = outcome.result if isinstance(outcome.result, Reject) else None
        if rejected is not None and rejected.requeue:  # delivered again as it was; without requeue, dropped
            self._pending.append(sent)

    def close(self) -> None:
        self.context.close()


@contextmanager
def queue(settings: Settings | Mapping[str, Any] | None = None) -> Iterator[TaskQueue]:
    """Capture every vectorsync task sent inside the block, to run in this process; see the module doc.

    Inside it, ``producer.index_record`` and the rest, ``default_producer()``, the tasks the worker's tasks
    send, and ``store.query``'s ``search``, ``rerank`` and ``answer`` all use one ``store.Client`` over
    ``memory_settings(settings)`` (``tasks.client``).
    Everything is put back at the end.
    """
    import worker.tasks  # noqa: F401  (registers the tasks)
    from worker.runtime.app import app
    from worker.runtime.context import use_context

    tasks = TaskQueue(memory_settings(settings))
    previous_context = use_context(tasks.context)
    previous_client = use_client(tasks.client)
    previous_send = vars(app).get("send_task")
    app.send_task = tasks.send_task  # what the tasks' apply_async calls
    try:
        yield tasks
    finally:
        if previous_send is not None:
            app.send_task = previous_send
        else:
            del app.send_task
        use_client(previous_client)
        use_context(previous_context)
        tasks.close()
