"""The DocumentWriter of pushed documents: the newest push of an id wins, whatever order pushes and deletes
arrive in. Memory store, fake embeddings, the memory ledger."""

from __future__ import annotations

from store import Filter
from store.state.ledger import MemoryLedger
from tests.unit.worker.pipeline.pipelines import make_jobs
from worker.pipeline.batch import Document


def test_pushed_documents_newest_version_wins() -> None:
    jobs, _ = make_jobs(MemoryLedger())
    documents, collection = jobs.documents, jobs.pipeline.collection
    documents.index_documents([Document("d1", "the newer text", {"v": 2}, version=20)])
    stale = documents.index_documents([Document("d1", "an older push arriving late", {"v": 1}, version=10)])
    assert stale.skipped == ["d1"]
    [match] = collection.search([1.0] * 16, filter=Filter.eq("record_id", "d1"))
    assert match.metadata["v"] == 2
    documents.delete_documents(["d1"], version=21)
    assert collection.count() == 0


def test_pushes_and_deletes_arriving_out_of_order_leave_the_newest() -> None:
    jobs, _ = make_jobs(MemoryLedger())
    documents = jobs.documents

    def text_of(doc_id: str) -> list[str]:
        return [m.text for m in jobs.pipeline.collection.search([1.0] * 16, filter=Filter.eq("record_id", doc_id))]

    documents.index_documents([Document("d", "alpha", version=10)])
    documents.index_documents([Document("d", "alpha", version=30)])  # same content, newer: remembered
    assert documents.index_documents([Document("d", "beta", version=20)]).skipped == ["d"]  # late and older
    assert text_of("d") == ["alpha"]

    assert documents.delete_documents(["d"], version=40).deleted == ["d"]
    assert documents.index_documents([Document("d", "gamma", version=35)]).skipped == ["d"]  # older than the delete
    assert text_of("d") == []
    assert documents.delete_documents(["e"], version=5).deleted == ["e"]  # never pushed: a tombstone all the same
    documents.index_documents([Document("d", "delta", version=50)])
    assert text_of("d") == ["delta"]
    assert documents.delete_documents(["d"], version=45).superseded == ["d"]  # a delete older than the push
    assert text_of("d") == ["delta"]
