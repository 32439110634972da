"""The batch Indexer in one process: memory store, fake embeddings, the memory ledger, Python and pushed sources.

No database: the memory ledger is the reference the PostgreSQL one is held to (tests/unit/store/state/test_ledger.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from store import ConfigError, Filter
from store.state.ledger import MemoryLedger
from tests.unit.worker.pipeline.pipelines import make_jobs
from worker.sources.python import PythonSource

RECORDS: dict[str, dict[str, Any]] = {}


def load_records(ids: list[str] | None) -> Iterable[dict[str, Any]]:
    """The Python source these tests configure: ``load_records`` of this module."""
    return [r for key, r in RECORDS.items() if ids is None or key in ids]


def test_python_source_index_skip_and_delete() -> None:
    RECORDS.clear()
    RECORDS.update(
        {
            "a": {"id": "a", "text": "alpha beta gamma delta " * 5, "metadata": {"kind": "x"}},
            "b": {"id": "b", "text": "short", "metadata": {"kind": "y"}},
        }
    )
    jobs, embeddings = make_jobs(MemoryLedger(), source=PythonSource(loader=f"{__name__}:load_records"))
    indexer, collection = jobs.indexer, jobs.pipeline.collection
    first = indexer.index(["a", "b", "missing"])
    assert sorted(first.indexed) == ["a", "b"] and first.deleted == ["missing"]
    chunks = collection.count(Filter.eq("record_id", "a"))
    assert chunks > 1 and collection.count(Filter.eq("record_id", "b")) == 1
    sent = len(embeddings.texts)

    again = indexer.index(["a", "b"])
    assert sorted(again.skipped) == ["a", "b"] and len(embeddings.texts) == sent

    RECORDS["a"]["text"] = "now short"
    del RECORDS["b"]
    third = indexer.index(["a", "b"])
    assert third.indexed == ["a"] and third.deleted == ["b"]
    assert collection.count(Filter.eq("record_id", "a")) == 1  # no stale chunk left
    assert collection.count() == 1


def test_a_collection_without_a_source_cannot_be_read_by_id() -> None:
    jobs, _ = make_jobs(MemoryLedger())
    with pytest.raises(ConfigError, match="has no source to read records from"):
        jobs.indexer.index(["1"])


def test_a_record_changed_between_its_read_and_its_write_is_left_to_its_own_task() -> None:
    """The write reads the source again under the records' locks: a record whose content moved since the batch
    read it is superseded (the task sent for that change writes it), never stored stale."""
    RECORDS.clear()
    RECORDS.update({"a": {"id": "a", "text": "the first text"}, "b": {"id": "b", "text": "stays as it is"}})
    jobs, _ = make_jobs(MemoryLedger(), source=PythonSource(loader=f"{__name__}:load_records"))
    embed = jobs.pipeline.embed

    def edited_meanwhile(*args: Any, **kwargs: Any) -> Any:
        RECORDS["a"]["text"] = "edited while the batch embedded"
        return embed(*args, **kwargs)

    jobs.pipeline.embed = edited_meanwhile  # type: ignore[method-assign]
    result = jobs.indexer.index(["a", "b"])
    assert result.superseded == ["a"] and result.indexed == ["b"]
    assert jobs.pipeline.collection.count(Filter.eq("record_id", "a")) == 0
