"""``verify`` over the worker's own reading of a Python source, with the worker's tasks run in this process
(``producer.testing``) on memory parts: each drift made behind the ledger's back is found, and ``repair`` sends
what fixes it through the worker's normal path, leaving every other record as it was."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from producer import testing
from store.vectors.memory import MemoryCollection
from store.vectors.records import VectorRecord
from store.verify import Kind, Report
from worker.repair.chunk_reading import ChunkReading

RECORDS: dict[str, dict[str, Any]] = {}
TEXT = "renewal call about pricing and the onboarding timeline, then the next steps of the rollout plan"


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
    for i in range(1, 7):
        RECORDS[str(i)] = {"id": str(i), "text": f"record {i}: {TEXT}", "kind": "call"}
    with testing.queue(SETTINGS) as tasks:
        tasks.producer.index_records("notes", list(RECORDS))
        tasks.run_queue()
        yield tasks


def verified(tasks: testing.TaskQueue, **options: Any) -> Report:
    with ChunkReading(tasks.client) as reading:
        return tasks.client.verify("notes", source=reading, **options)


def store(tasks: testing.TaskQueue) -> MemoryCollection:
    collection = tasks.client.get_collection("notes")
    assert isinstance(collection, MemoryCollection)
    return collection


def rows(tasks: testing.TaskQueue) -> dict[str, VectorRecord]:
    return dict(store(tasks)._records)


def test_an_indexed_collection_is_clean_and_every_chunk_compared(tasks: testing.TaskQueue) -> None:
    report = verified(tasks)
    assert report.clean and report.first == [] and report.notes == []
    assert (report.records, report.chunks) == (6, len(rows(tasks)))
    assert report.chunks > 6  # several chunks a record: each compared by id, text, vector and model


def test_each_drift_is_found_and_repair_fixes_them_all_leaving_the_rest_alone(tasks: testing.TaskQueue) -> None:
    before = rows(tasks)
    collection = store(tasks)
    collection.replace_records(["1"], [])  # a record's chunks deleted
    changed = before["2:1"]
    collection.upsert(dataclasses.replace(changed, text="words no chunker made"))  # a chunk's text changed
    collection.delete("3:2")  # a record with one chunk fewer than the ledger says
    sized = before["4:0"]
    collection._records["4:0"] = dataclasses.replace(sized, embedding=[*sized.embedding, 0.5])  # a wrong vector
    orphan = dataclasses.replace(before["5:0"], id="99:0", metadata={"record_id": "99", "chunk": 0})
    collection.upsert(orphan)  # chunks of a record the source and the ledger do not have

    report = verified(tasks)
    assert not report.clean
    found = {d.record_id: d.kinds for d in report.first}
    assert found == {
        "1": (Kind.MISSING,),
        "2": (Kind.TEXT,),
        "3": (Kind.COUNT,),
        "4": (Kind.VECTOR,),
        "99": (Kind.ORPHAN,),
    }
    assert (report.drifted, report.orphan_records, report.orphan_chunks) == (4, 1, 1)
    assert "missing 3:2" in next(d for d in report.first if d.record_id == "3").details[0]

    repaired = verified(tasks, repair=True)
    assert repaired.repair is not None
    assert (repaired.repair.reindexed, repaired.repair.orphans_sent, repaired.repair.batches) == (4, 1, 2)
    tasks.run_queue()
    assert verified(tasks).clean
    after = rows(tasks)
    assert "99:0" not in after
    assert after == {**before}  # each drifted record written again as it was; nothing else touched


def test_an_orphan_the_source_still_has_is_indexed_not_deleted(tasks: testing.TaskQueue) -> None:
    RECORDS["7"] = {"id": "7", "text": f"record 7: {TEXT}", "kind": "call"}  # in the source, never indexed
    stray = dataclasses.replace(rows(tasks)["5:0"], id="7:0", metadata={"record_id": "7", "chunk": 0})
    store(tasks).upsert(stray)
    assert verified(tasks).orphan_records == 1
    verified(tasks, repair=True)
    tasks.run_queue()
    assert verified(tasks).clean
    assert tasks.client.ledger.entries("notes", ["7"])["7"].chunks == len(
        tasks.client.get_collection("notes").chunks_of("7")
    )


def test_a_sample_checks_that_many_records_and_the_orphans_still(tasks: testing.TaskQueue) -> None:
    report = verified(tasks, sample=3)
    assert (report.sample, report.records, report.clean) == (3, 3, True)
    assert verified(tasks, sample=100).records == 6


def test_a_changed_source_is_stale_not_drifted(tasks: testing.TaskQueue) -> None:
    RECORDS["1"]["text"] = "a different text altogether"
    report = verified(tasks)
    assert (report.clean, report.stale) == (True, 1)


def test_a_pushed_collection_is_compared_and_its_repair_says_what_it_leaves(tasks: testing.TaskQueue) -> None:
    tasks.producer.index_document("docs", "d1", f"a pushed note: {TEXT}", {}, version=3)
    tasks.run_queue()
    with ChunkReading(tasks.client) as reading:
        assert tasks.client.verify("docs", source=reading).clean
        tasks.client.get_collection("docs").replace_records(["d1"], [])
        report = tasks.client.verify("docs", source=reading, repair=True)
    assert (report.drifted, report.repair is not None) == (1, True)
    assert report.repair is not None and report.repair.reindexed == 0
    assert "push the drifted ones again" in report.repair.left[0]
