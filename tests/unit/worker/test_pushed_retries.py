"""A pushed document whose provider calls keep failing is retried until they succeed: its content lives only
in its task, so giving up after worker.max_retries (as a source's record does) lost the edit for good."""

from __future__ import annotations

from typing import Any

import pytest

from producer import testing
from store.contract import INDEX_DOCUMENT
from worker.batches import BatchResult
from worker.pipeline import Indexer


def test_a_pushed_document_outlasts_max_retries_of_provider_outage(monkeypatch: pytest.MonkeyPatch) -> None:
    index, outage = Indexer.index_documents, [6]

    def failing(self: Indexer, documents: Any) -> BatchResult:
        if outage[0]:
            outage[0] -= 1
            return BatchResult(retry={d.id: "TransientError: every embedding model failed" for d in documents})
        return index(self, documents)

    monkeypatch.setattr(Indexer, "index_documents", failing)
    settings = {
        "worker": {"max_retries": 2, "retry_delay": 0.01},
        "collections": {"docs": {"source": {"kind": "push"}}},
    }
    with testing.queue(settings) as queue:
        queue.producer.index_document("docs", "doc-1", "The office opens at ten.")
        queue.run_queue()
        assert [t.retries for t in queue.done if t.name == INDEX_DOCUMENT] == list(range(7))
        assert queue.ledger.failures("docs") == []
        assert [m.id for m in queue.store.get_collection("docs", create=True).search("office", limit=3)] == ["doc-1:0"]
