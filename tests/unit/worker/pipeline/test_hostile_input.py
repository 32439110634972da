"""One bad record fails alone, with a failures message naming the value and the fix; its batch-mates are indexed.
Regression tests of issue 9's defects: hostile text, metadata, ids; caps (source rows and what PostgreSQL
refuses: tests/integration/worker/test_hostile_input.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from store import ConfigError, Filter, VectorRecord, VectorStore
from store.embeddings import Embeddings
from store.settings import LimitSettings, Settings
from store.state.ledger import MemoryLedger
from store.vectors.backends import memory_store
from tests.backends import unique_name
from tests.unit.worker.pipeline.pipelines import CountingEmbeddings
from worker.pipeline.batch import Document
from worker.pipeline.chunker import Chunker
from worker.pipeline.core import Pipeline, Recipe
from worker.runtime.context import Jobs
from worker.sources.push import PushSource
from worker.sources.python import PythonSource

RECORDS: dict[str, dict[str, Any]] = {}


def load_records(ids: list[str] | None) -> Iterable[dict[str, Any]]:
    """The Python source of these tests: ``load_records`` of this module."""
    return [r for key, r in RECORDS.items() if ids is None or key in ids]


class StrictEmbeddings(CountingEmbeddings):
    """Refuses what a real provider's JSON encoder would: text that is not valid UTF-8."""

    def embed_many_with_models(self, texts: Any, *, reuse: Any = None, scope: str = "") -> Any:
        for text in texts:
            text.encode("utf-8")  # a lone surrogate raises here, as it would in the provider call
        return super().embed_many_with_models(texts, reuse=reuse, scope=scope)


def make_jobs(source: Any = None, *, store: VectorStore | None = None, limits: LimitSettings | None = None) -> Jobs:
    """The jobs over a fresh collection of ``store`` (a memory store if None); without ``source`` its records
    are pushed; the embeddings refuse what a real provider would."""
    settings = Settings.model_validate(
        {"vectors": {"store": "memory", "dimensions": 16}, "embeddings": {"cache_ttl_days": 0}}
    )
    name = unique_name()
    store = store or memory_store(dimensions=16)
    pipeline = Pipeline(
        name=name,
        collection=store.get_collection(name, create=True),
        source=source or PushSource(name),
        recipe=Recipe(Chunker(max_tokens=8, overlap=2), StrictEmbeddings(Embeddings.from_settings(settings))),
        ledger=MemoryLedger(),
        limits=limits,
    )
    return Jobs.over(pipeline)


def python_jobs(**records: dict[str, Any]) -> Jobs:
    RECORDS.clear()
    RECORDS.update({key: {"id": key, **value} for key, value in records.items()})
    return make_jobs(PythonSource(loader=f"{__name__}:load_records"))


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels):
        value = {"n": value}
    return value


def test_hostile_records_fail_alone_and_their_batch_mates_are_indexed() -> None:
    jobs = python_jobs(
        good={"text": "plain good text", "metadata": {"kind": "a"}},
        surrogate={"text": "broken \ud800 text", "metadata": {}},
        deep={"text": "deep metadata", "metadata": nested(300)},
        fine={"text": "fine", "metadata": {}},
        huge={"text": "word " * 20_000, "metadata": {}},
        nan={"text": "nan metadata", "metadata": {"score": float("nan")}},
    )
    RECORDS["x" * 600] = {"id": "x" * 600, "text": "an id too long", "metadata": {}}
    result = jobs.indexer.index(list(RECORDS))
    assert sorted(result.indexed) == ["fine", "good", "surrogate"]  # the lone surrogate is dropped before chunking
    assert all("\ud800" not in text for text in jobs.pipeline.embeddings.texts)  # type: ignore[attr-defined]
    failed = result.failed
    assert set(failed) == {"deep", "huge", "nan", "x" * 600}
    assert "nests more than 32 levels deep: flatten it, or raise limits.max_metadata_depth" in failed["deep"]
    assert "over limits.max_chunks_per_record (2000): split the record" in failed["huge"]
    assert "cannot be encoded as JSON" in failed["nan"]
    assert "600 characters, over limits.max_id_chars (512): use a shorter id" in failed["x" * 600]
    assert jobs.pipeline.collection.count(Filter.eq("record_id", "surrogate")) == 1


def test_a_blank_record_is_not_rewritten_on_every_reindex() -> None:
    jobs = python_jobs(blank={"text": "   ", "metadata": {}}, full={"text": "some words", "metadata": {}})
    assert sorted(jobs.indexer.index(["blank", "full"]).indexed) == ["blank", "full"]
    again = jobs.indexer.index(["blank", "full"])
    assert sorted(again.skipped) == ["blank", "full"] and again.indexed == []
    assert jobs.sweeper.stale_ids([("blank", ""), ("full", "")]) == []


def test_a_collection_emptied_behind_the_ledgers_back_is_indexed_again() -> None:
    store = memory_store(dimensions=16)
    RECORDS.clear()
    RECORDS.update({"a": {"id": "a", "text": "alpha"}, "b": {"id": "b", "text": "beta"}})
    jobs = make_jobs(PythonSource(loader=f"{__name__}:load_records"), store=store)
    pipeline = jobs.pipeline
    jobs.indexer.index(["a", "b"])
    store.drop_collection(pipeline.name)
    pipeline.collection = store.get_collection(pipeline.name, create=True)
    assert sorted(jobs.indexer.index(["a", "b"]).skipped) == ["a", "b"]  # the ledger alone would skip them all
    assert jobs.sweeper.forget_if_lost() is True
    assert sorted(jobs.indexer.index(["a", "b"]).indexed) == ["a", "b"] and pipeline.collection.count() == 2
    assert jobs.sweeper.forget_if_lost() is False


def test_pushing_to_a_collection_with_a_source_is_a_clear_error() -> None:
    documents = python_jobs(a={"text": "alpha"}).documents
    with pytest.raises(ConfigError, match="reads its records from its source .*use index_record for this one"):
        documents.index_documents([Document("a", "pushed anyway")])
    with pytest.raises(ConfigError, match="index_document and delete_document are for collections"):
        documents.delete_documents(["a"])


def test_qdrant_stops_checking_a_filter_in_python_at_the_cap() -> None:
    from store.vectors.qdrant import QdrantStore

    store = QdrantStore(":memory:", dimensions=4)
    store.limits = LimitSettings(max_residual_scan=50)
    notes = store.get_collection(unique_name(), create=True)
    notes.upsert_many(
        [VectorRecord(str(i), [1, i, 0, 0], metadata={"day": f"2026-01-{i % 28 + 1:02d}"}) for i in range(200)]
    )
    with pytest.raises(ConfigError, match="needs more than 50 points checked in Python"):
        notes.search([1, 0, 0, 0], filter=Filter.gte("day", "2099-01-01"))
    store.close()


#: Ids no table can hold (PostgreSQL's ledger keeps them escaped in its failures rows, the memory one as they are).
UNSTORABLE_IDS = ["nul\x00id", "sur\ud800"]
ID_RULE_TEXT = "a record id is a non-empty string of at most limits.max_id_chars characters, without NUL"


def test_a_record_id_with_a_nul_or_a_lone_surrogate_fails_alone_and_its_run_ends_done() -> None:
    """Issue 32, defect 1: the chunk id was refused inside the store's write with a ConfigError, which failed the
    whole batch and its run ('failed', nothing indexed, no failures row)."""
    from producer import testing
    from store.state.ledger import RunStatus

    RECORDS.clear()
    RECORDS.update(
        {key: {"id": key, "text": f"note {n} about renewals"} for n, key in enumerate(["1", *UNSTORABLE_IDS, "2"])}
    )
    settings = {"collections": {"notes": {"source": {"kind": "python", "loader": f"{__name__}:load_records"}}}}
    with testing.queue(settings) as queue:
        run_id = queue.producer.reindex_all("notes")
        queue.run_queue()
        run = queue.ledger.run(run_id)
        assert (run.status, run.done, run.failed) == (RunStatus.DONE, 2, 2)
        failures = {f.record_id: f.error for f in queue.ledger.failures("notes")}
        assert set(failures) == set(UNSTORABLE_IDS)
        assert all(ID_RULE_TEXT in error for error in failures.values()), failures
        assert queue.client.get_collection("notes").count() == 2


def test_a_pushed_document_with_an_unstorable_id_fails_alone() -> None:
    documents = make_jobs().documents
    result = documents.index_documents([Document("ok", "fine text"), *(Document(i, "text") for i in UNSTORABLE_IDS)])
    assert result.indexed == ["ok"]
    assert set(result.failed) == set(UNSTORABLE_IDS)
    assert all(ID_RULE_TEXT in error for error in result.failed.values())
    deleted = documents.delete_documents(["ok", *UNSTORABLE_IDS])
    assert deleted.deleted == ["ok"] and set(deleted.failed) == set(UNSTORABLE_IDS)
