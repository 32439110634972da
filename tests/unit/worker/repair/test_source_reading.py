"""``explain`` over the worker's own reading of a Python source, with the worker's tasks run in this process
(``producer.testing``): each verdict reached by doing to a record what happens to records."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from producer import testing
from store.explain import State
from worker.repair.source_reading import SourceReading

RECORDS: dict[str, dict[str, Any]] = {}


def load_records(ids: list[str] | None) -> Iterable[dict[str, Any]]:
    return [r for key, r in RECORDS.items() if ids is None or key in ids]


SETTINGS = {
    "collections": {
        "notes": {
            "source": {"kind": "python", "loader": f"{__name__}:load_records"},
            "chunker": {"max_tokens": 8, "overlap": 2},
        },
        "docs": {"source": {"kind": "push"}},
    }
}


@pytest.fixture
def tasks() -> Iterator[testing.TaskQueue]:
    RECORDS.clear()
    RECORDS["1"] = {"id": "1", "text": "renewal call about pricing and the onboarding timeline", "kind": "call"}
    with testing.queue(SETTINGS) as tasks:
        tasks.producer.index_record("notes", "1")
        tasks.run_queue()
        yield tasks


def explained(tasks: testing.TaskQueue, record_id: str = "1", collection: str = "notes") -> Any:
    with SourceReading(tasks.client) as reading:
        return tasks.client.explain(collection, record_id, source=reading)


def test_an_indexed_record_is_current_and_its_hash_is_the_ledgers(tasks: testing.TaskQueue) -> None:
    facts = explained(tasks)
    assert facts.verdict.state == State.CURRENT
    assert facts.entry is not None and facts.source.hash == facts.entry.content_hash
    assert facts.source.found and facts.source.text.startswith("renewal call")
    assert len(facts.chunks) == facts.entry.chunks > 1
    assert [c.chunk for c in facts.chunks] == list(range(len(facts.chunks)))


def test_a_changed_record_is_stale_until_its_task_runs(tasks: testing.TaskQueue) -> None:
    RECORDS["1"]["text"] = "a different text altogether"
    assert explained(tasks).verdict.state == State.STALE
    tasks.producer.index_record("notes", "1")
    tasks.run_queue()
    assert explained(tasks).verdict.state == State.CURRENT


def test_a_record_whose_chunks_the_store_lost_is_missing(tasks: testing.TaskQueue) -> None:
    tasks.client.get_collection("notes").replace_records(["1"], [])
    facts = explained(tasks)
    assert facts.verdict.state == State.MISSING
    assert f"run `vectorsync verify {facts.collection} --repair`" in facts.verdict.line
    tasks.producer.index_record("notes", "1")  # which is why the verdict does not name it
    tasks.run_queue()
    assert explained(tasks).verdict.state == State.MISSING


def test_a_deleted_record_is_gone_and_its_chunks_go_once_its_task_runs(tasks: testing.TaskQueue) -> None:
    del RECORDS["1"]
    assert explained(tasks).verdict.line.startswith("gone from the source: its ")
    tasks.producer.index_record("notes", "1")
    tasks.run_queue()
    facts = explained(tasks)
    assert (facts.verdict.state, facts.chunks) == (State.GONE, [])


def test_a_record_whose_metadata_a_worker_refuses_has_no_hash_and_fails_when_indexed(tasks: testing.TaskQueue) -> None:
    RECORDS["2"] = {"id": "2", "text": "fine", "metadata": {"score": float("nan")}}
    facts = explained(tasks, "2")
    assert facts.source.found and facts.source.hash is None
    assert "content hash cannot be computed" in facts.source.note
    tasks.producer.index_record("notes", "2")
    tasks.run_queue()
    facts = explained(tasks, "2")
    assert facts.verdict.state == State.FAILED
    assert facts.verdict.line.endswith("retry with `vectorsync failures --retry`")


def test_a_pushed_record_is_not_read_from_any_source(tasks: testing.TaskQueue) -> None:
    tasks.producer.index_document("docs", "d1", "a pushed note", {}, version=3)
    tasks.run_queue()
    facts = explained(tasks, "d1", "docs")
    assert (facts.source.found, facts.verdict.state) == (None, State.INDEXED)
    assert "version 3" in facts.verdict.line


def test_on_a_qdrant_store_the_verdicts_read_its_points() -> None:
    """Qdrant's local mode (the suite's in-process Qdrant), indexed by the worker's own Indexer."""
    from store.client import Client
    from store.state.ledger import MemoryLedger
    from store.vectors.qdrant import QdrantStore
    from worker.pipeline.indexer import Indexer
    from worker.runtime.context import WorkerContext

    RECORDS.clear()
    RECORDS["1"] = {"id": "1", "text": "renewal call about pricing and the onboarding timeline"}
    settings = testing.memory_settings(SETTINGS)
    store = QdrantStore(":memory:", dimensions=settings.vectors.dimensions)
    client = Client(settings, store=store, ledger=MemoryLedger())
    context = WorkerContext.of(client)
    try:
        Indexer(context.pipeline("notes")).index(["1"])
        with SourceReading(client) as reading:
            facts = client.explain("notes", "1", source=reading)
            assert (facts.backend, facts.verdict.state) == ("qdrant", State.CURRENT)
            assert facts.chunks and all(c.written_at is None for c in facts.chunks)
            assert "the qdrant store keeps no write time of a chunk" in facts.notes
            store.get_collection("notes").replace_records(["1"], [])
            assert client.explain("notes", "1", source=reading).verdict.state == State.MISSING
    finally:
        context.close(client=False)
        client.close()
        store.close()
