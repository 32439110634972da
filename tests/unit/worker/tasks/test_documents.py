"""A pushed document's work (``worker.tasks.documents``), run with the worker's own code in this process
(``producer.testing``): retried for as long as its provider fails, kept when given up, and a sweep sends lost
pushes again, a bounded number."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from producer import testing
from store.broker.pushes import Push
from store.contract import INDEX_DOCUMENT
from worker.pipeline.batch import BatchResult
from worker.pipeline.documents import DocumentWriter
from worker.tasks import documents, flow, indexing
from worker.tasks.retries import DeliveredTooOften


class Kept:
    """The kept pushes, in lists (store.broker.pushes keeps them in Redis)."""

    def __init__(self, lost: list[Push] | None = None) -> None:
        self.settled: list[tuple[str, str, int]] = []
        self.kept: list[Push] = []
        self.waiting = lost or []

    def settle(self, collection: str, id: str, version: int) -> None:
        self.settled.append((collection, id, version))

    def keep(self, collection: str, push: Push) -> None:
        self.kept.append(push)

    def lost(self, collection: str, *, older_than: float) -> Iterator[Push]:
        yield from self.waiting


def test_a_push_given_up_after_too_many_redeliveries_keeps_its_content_and_is_sent_by_no_sweep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its content is in no source: dropping its copy lost it for good. It is parked instead (never lost, never
    sent again), and its failures row names it."""
    kept = Kept()
    with testing.queue({"collections": {"docs": {"source": {"kind": "push"}}}}) as queue:
        monkeypatch.setattr(type(queue.context), "pushes", lambda self: kept)

        def too_often(task: Any) -> None:
            raise DeliveredTooOften("its task came back 6 times")

        monkeypatch.setattr(flow, "check_redeliveries", too_often)
        indexing.index_document.apply(args=("docs", "d1", "text", {"k": 1}, 7), throw=True).get()
        [failure] = queue.ledger.failures("docs")
    assert kept.settled == [] and [(p.id, p.text, p.version, p.sent_at) for p in kept.kept] == [
        ("d1", "text", 7, math.inf)
    ]
    assert failure.record_id == "d1" and "came back 6 times" in failure.error


def test_a_sweep_sends_again_at_most_so_many_pushes_and_marks_them_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    kept = Kept([Push(f"d{i}", "text", {}, i + 1, 0.0) for i in range(5)])
    with testing.queue({"collections": {"docs": {"source": {"kind": "push"}}}}) as queue:
        monkeypatch.setattr(type(queue.context), "pushes", lambda self: kept)
        assert documents.send_lost("docs", at_most=2) == 2
        assert [t.args[1] for t in queue.pending] == ["d0", "d1"]
    assert [p.id for p in kept.kept] == ["d0", "d1"] and all(p.sent_at > 0 for p in kept.kept)


def test_a_pushed_document_outlasts_max_retries_of_provider_outage(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its content lives only in its task: giving up after worker.max_retries (as a source's record does) lost
    the edit for good, so it is retried until its provider calls succeed."""
    index, outage = DocumentWriter.index_documents, [6]

    def failing(self: DocumentWriter, documents: Any) -> BatchResult:
        if outage[0]:
            outage[0] -= 1
            return BatchResult(retry={d.id: "TransientError: every embedding model failed" for d in documents})
        return index(self, documents)

    monkeypatch.setattr(DocumentWriter, "index_documents", failing)
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
