"""What every job over a generation's pipeline shares: records read (a refused read retried a record at a time),
cleaned and hashed, planned against the ledger (one bad value fails its record alone), embedded without buying a
stored vector twice. Memory store, fake embeddings, the memory ledger."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from store import Filter
from store.errors import StoreError
from store.state.ledger import MemoryLedger
from tests.fake_openai import FakeOpenAI, settings_for
from tests.unit.worker.pipeline.pipelines import make_jobs
from worker.pipeline.batch import BatchResult
from worker.pipeline.chunker import Chunker
from worker.pipeline.core import Pipeline, Recipe
from worker.sources.base import SourceRecord
from worker.sources.python import PythonSource

RECORDS: dict[str, dict[str, Any]] = {}


def load_records(ids: list[str] | None) -> Iterable[dict[str, Any]]:
    """The Python source these tests configure: ``load_records`` of this module."""
    return [r for key, r in RECORDS.items() if ids is None or key in ids]


def python_source() -> PythonSource:
    return PythonSource(loader=f"{__name__}:load_records")


class RefusingSource(PythonSource):
    """Refuses any read that holds ``bad``, as a database refuses a value it cannot convert."""

    def fetch(self, ids: Sequence[str]) -> dict[str, SourceRecord]:
        if "bad" in ids:
            raise StoreError("value out of range")
        return super().fetch(ids)


def test_a_read_the_source_refuses_is_retried_a_record_at_a_time_and_fails_the_one_at_fault() -> None:
    RECORDS.clear()
    RECORDS.update({key: {"id": key, "text": f"note {key}"} for key in ("a", "bad", "b")})
    jobs, _ = make_jobs(MemoryLedger(), source=RefusingSource(loader=f"{__name__}:load_records"))
    result = BatchResult()
    found = jobs.pipeline.fetch(["a", "bad", "b"], result)
    assert sorted(found) == ["a", "b"] and list(result.failed) == ["bad"]
    assert "value out of range" in result.failed["bad"] and "fix the row in the source" in result.failed["bad"]


def test_the_content_hash_follows_the_text_the_metadata_and_the_chunker_but_not_unstorable_characters() -> None:
    jobs, _ = make_jobs(MemoryLedger())
    pipeline = jobs.pipeline
    record = SourceRecord("a", "some text", {"kind": "x"})
    digest = pipeline.content_hash(record)
    assert pipeline.content_hash(SourceRecord("a", "some text\x00", {"kind": "x"})) == digest  # stored without it
    assert pipeline.content_hash(SourceRecord("a", "other text", {"kind": "x"})) != digest
    assert pipeline.content_hash(SourceRecord("a", "some text", {"kind": "y"})) != digest
    other = Pipeline(
        name=pipeline.name,
        collection=pipeline.collection,
        source=pipeline.source,
        recipe=Recipe(Chunker(max_tokens=9, overlap=2), pipeline.embeddings),
        ledger=pipeline.ledger,
    )
    assert other.content_hash(record) != digest


def test_one_record_with_unencodable_metadata_fails_alone() -> None:
    RECORDS.clear()
    RECORDS.update(
        {
            "ok": {"id": "ok", "text": "fine text", "metadata": {"n": 1}},
            "bad": {"id": "bad", "text": "also text", "metadata": {"n": float("nan")}},
        }
    )
    jobs, _ = make_jobs(MemoryLedger(), source=python_source())
    result = jobs.indexer.index(["ok", "bad"])
    assert result.indexed == ["ok"]
    assert list(result.failed) == ["bad"] and "cannot be encoded as JSON" in result.failed["bad"]


def test_a_declared_field_of_another_type_fails_its_record_alone_before_any_embedding() -> None:
    RECORDS.clear()
    RECORDS.update(
        {
            "ok": {"id": "ok", "text": "fine text", "metadata": {"owner_id": 1}},
            "bad": {"id": "bad", "text": "never embedded", "metadata": {"owner_id": "seven"}},
        }
    )
    jobs, embeddings = make_jobs(MemoryLedger(), source=python_source())
    jobs.pipeline.collection.declare_indexes({"owner_id": "integer"})
    result = jobs.indexer.index(["ok", "bad"])
    assert result.indexed == ["ok"]
    assert "metadata field 'owner_id' = 'seven' is not a single integer" in result.failed["bad"]
    assert embeddings.texts == ["fine text"]


def test_a_record_is_embedded_again_when_another_endpoint_serves_its_model() -> None:
    """Audit defect: the ledger's "unchanged" check compared model names only, so a chain moved to a server
    with other weights under the same name skipped every record and kept the old server's vectors."""
    RECORDS.clear()
    RECORDS.update({"a": {"id": "a", "text": "alpha beta gamma", "metadata": {}}})
    ledger, source = MemoryLedger(), python_source()
    with FakeOpenAI(dimensions=16) as first, FakeOpenAI(dimensions=16, dense=True) as second:
        old, _ = make_jobs(ledger, source=source, chain=settings_for(first, dimensions=16))
        assert old.indexer.index(["a"]).indexed == ["a"]
        new, embeddings = make_jobs(ledger, source=source, chain=settings_for(second, dimensions=16), like=old.pipeline)
        assert new.indexer.index(["a"]).indexed == ["a"] and embeddings.texts == ["alpha beta gamma"]
        assert new.indexer.index(["a"]).skipped == ["a"]  # and once only
        assert second.calls == 1


def test_a_metadata_only_edit_buys_no_vector_and_an_edit_buys_only_its_new_chunks() -> None:
    """With no embedding cache (expired, flushed or off), a record whose text a change left as it was re-embedded
    every chunk: the store held those vectors all along (issue: vectors never bought twice)."""
    RECORDS.clear()
    words = [f"word{i}" for i in range(40)]
    RECORDS["a"] = {"id": "a", "text": " ".join(words), "metadata": {"kind": "x"}}
    jobs, embeddings = make_jobs(MemoryLedger(), source=python_source())
    indexer, collection = jobs.indexer, jobs.pipeline.collection
    assert jobs.pipeline.embeddings.cache is None
    indexer.index(["a"])
    chunks = {c.text for c in collection.chunks_of("a")}
    calls = sum(embeddings.stats.calls.values())

    RECORDS["a"]["metadata"] = {"kind": "y"}
    assert indexer.index(["a"]).indexed == ["a"]
    assert sum(embeddings.stats.calls.values()) == calls and embeddings.stats.reused == len(chunks)
    assert {m.metadata["kind"] for m in collection.search([1.0] * 16, filter=Filter.eq("record_id", "a"))} == {"y"}

    RECORDS["a"]["text"] = " ".join([*words[:-3], "changed", "at", "end"])
    indexer.index(["a"])
    now = {c.text for c in collection.chunks_of("a")}
    assert embeddings.stats.reused == len(chunks) + len(now & chunks)  # the unchanged chunks, from the store
    assert sum(embeddings.stats.calls.values()) == calls + 1  # the new chunks alone, in one call
    assert 0 < len(now - chunks) < len(now)
