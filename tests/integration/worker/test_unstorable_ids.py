"""Issue 48, defect 1: record ids PostgreSQL cannot hold (a NUL, a lone surrogate) from a Python loader, through
the real PostgreSQL ledger. The fan-out's ledger lookup (``worker.runs.fanout.changed_ids``) and ``reindex --plan``'s
reader sent them to SQL and failed the whole run, with no failures row; the in-memory ledger hid it. Each bad id
must fail alone, with a failures row naming it (escaped) and the rule, while its batch-mates are indexed."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest

from producer import testing
from store.client import Client, Hooks
from store.plan.costing import plan
from store.process.defaults import use_client
from store.state.ledger import RunProgress, RunStatus
from store.state.ledger.postgres import PostgresLedger
from store.vectors.records import escape_unstorable
from tests.backends import unique_name
from worker.repair.plan_reading import PlanReading

RECORDS: dict[str, dict[str, Any]] = {}
#: Ids no PostgreSQL text column holds, and the good ids beside them.
UNSTORABLE_IDS = ["nul\x00id", "sur\ud800", "\x00", "\udfff tail"]
GOOD_IDS = ["1", "2", "3"]
#: The start of the rule every refusal of an id states (``store.vectors.records.ID_RULE``).
ID_RULE_TEXT = "a record id is a non-empty string of at most limits.max_id_chars characters, without NUL"


def load_records(ids: list[str] | None) -> Iterable[dict[str, Any]]:
    """The Python loader of these tests: the records of ``RECORDS`` among ``ids`` (all of them for None)."""
    return [record for key, record in RECORDS.items() if ids is None or key in ids]


def loader_records(ids: Iterable[str]) -> None:
    """``RECORDS`` holds one note per id, and nothing else."""
    RECORDS.clear()
    RECORDS.update({key: {"id": key, "text": f"note {n} about renewals"} for n, key in enumerate(ids)})


class PostgresTaskQueue(testing.TaskQueue):
    """``producer.testing``'s in-process queue, its tasks reading and writing the real PostgreSQL ledger (the store
    and the embeddings stay the in-memory ones)."""

    def __init__(self, settings: Any, ledger: PostgresLedger) -> None:
        super().__init__(settings)
        self.context.close()
        from worker.runtime.context import WorkerContext

        self.client = Client(settings, ledger=ledger, hooks=Hooks(send=self.send_task))
        self.context = WorkerContext.of(self.client)


@contextmanager
def postgres_queue(ledger: PostgresLedger, settings: Mapping[str, Any]) -> Iterator[PostgresTaskQueue]:
    """``testing.queue`` over ``ledger``, the real PostgreSQL one, and ``settings`` (its ``[collections]``, ``[worker]``
    ...): the worker's tasks run in this process; the ledger stays open."""
    import worker.tasks  # noqa: F401  (registers the tasks)
    from worker.runtime.app import app
    from worker.runtime.context import use_context

    tasks = PostgresTaskQueue(testing.memory_settings(settings), ledger)
    previous_context, previous_client = use_context(tasks.context), use_client(tasks.client)
    previous_send = vars(app).get("send_task")
    app.send_task = tasks.send_task
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


def python_collection(name: str) -> dict[str, Any]:
    """The settings of a collection ``name`` read through ``load_records``."""
    return {"collections": {name: {"source": {"kind": "python", "loader": f"{__name__}:load_records"}}}}


def reindex(queue: PostgresTaskQueue, name: str, *, sweep: bool = False) -> RunProgress:
    """A reindex of ``name`` (``sweep``: a reconcile sweep) run to its end in this process; its run as the ledger
    holds it."""
    run_id = queue.producer.reconcile(name) if sweep else queue.producer.reindex_all(name)
    queue.run_queue()
    run = queue.ledger.run(run_id)
    assert run is not None
    return run


def assert_failed_alone(queue: PostgresTaskQueue, name: str, bad: Iterable[str]) -> None:
    """Each bad id has its failures row, under its escaped form, whose error quotes it and states the rule."""
    failures = {f.record_id: f.error for f in queue.ledger.failures(name)}
    assert set(failures) == {escape_unstorable(i) for i in bad}, failures
    for record_id in bad:
        error = failures[escape_unstorable(record_id)]
        assert escape_unstorable(repr(record_id)) in error and ID_RULE_TEXT in error, error


@pytest.fixture
def name() -> str:
    return unique_name("badids")


@pytest.fixture
def ledger(postgres_url: str) -> Iterator[PostgresLedger]:
    opened = PostgresLedger(postgres_url)
    yield opened
    opened.close()


def test_a_reindex_over_unstorable_ids_fails_each_alone_on_postgresql(ledger: PostgresLedger, name: str) -> None:
    loader_records([GOOD_IDS[0], *UNSTORABLE_IDS, *GOOD_IDS[1:]])
    with postgres_queue(ledger, python_collection(name)) as queue:
        run = reindex(queue, name)  # a first load: the ledger holds none of the page
        assert (run.status, run.done, run.failed) == (RunStatus.DONE, 3, 4), run
        assert_failed_alone(queue, name, UNSTORABLE_IDS)
        assert queue.client.get_collection(name).count() == 3
        RECORDS["4"] = {"id": "4", "text": "a note added since"}
        again = reindex(queue, name)  # the ledger holds some of the page now: the stale ids are judged
        assert (again.status, again.done, again.failed) == (RunStatus.DONE, 1, 4), again
        assert_failed_alone(queue, name, UNSTORABLE_IDS)
        assert queue.client.get_collection(name).count() == 4
        RECORDS["5"] = {"id": "5", "text": "another note added since"}
        swept = reindex(queue, name, sweep=True)  # a reconcile sweep judges each page against the ledger too
        assert (swept.status, swept.done, swept.failed) == (RunStatus.DONE, 1, 4), swept
        assert_failed_alone(queue, name, UNSTORABLE_IDS)
        assert queue.client.get_collection(name).count() == 5


def test_reindex_plan_counts_unstorable_ids_as_failed_on_postgresql(ledger: PostgresLedger, name: str) -> None:
    loader_records([*GOOD_IDS, *UNSTORABLE_IDS])
    with postgres_queue(ledger, python_collection(name)) as queue, PlanReading(queue.client) as reader:
        first = plan(queue.client.settings, queue.client.ledger, name, reader=reader)
        assert (first.new, first.failed, first.records) == (3, 4, 7), first
        reindex(queue, name)
        RECORDS["1"]["text"] = "a note changed since"
        second = plan(queue.client.settings, queue.client.ledger, name, reader=reader)
        assert (second.changed, second.unchanged, second.failed) == (1, 2, 4), second


#: Refused ids whose failures told too little: a NUL repeated past what an error keeps (the rule was cut off), and
#: 4,500 bytes that do not compress, over what PostgreSQL's btree takes as one key (no failures row at all).
LONG_IDS = ["nul\x00" * 300, "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(1500))]


def test_a_long_refused_id_has_a_failures_row_naming_it_and_the_rule(ledger: PostgresLedger, name: str) -> None:
    loader_records([GOOD_IDS[0], *LONG_IDS])
    with postgres_queue(ledger, python_collection(name)) as queue:
        run = reindex(queue, name)
        assert (run.status, run.done, run.failed) == (RunStatus.DONE, 1, 2), run
        failures = {f.record_id: f.error for f in queue.ledger.failures(name)}
    assert len(failures) == 2, failures
    for record_id in LONG_IDS:
        beginning = escape_unstorable(record_id[:40])
        kept = next(kept for kept in failures if kept.startswith(beginning))
        assert len(kept.encode()) <= 2048, kept  # the key of its row: a beginning, then a digest of the whole id
        assert escape_unstorable(repr(record_id[:40])[1:-1]) in failures[kept], failures[kept]
        assert "limits.max_id_chars" in failures[kept], failures[kept]
