"""The Indexer in one process: memory store, fake embeddings, the memory ledger, Python and pushed sources.

No database: the memory ledger is the reference the PostgreSQL one is held to
(tests/unit/store/state/ledger/test_base.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from store import ConfigError, Filter
from store.embeddings import Embeddings
from store.settings import Settings
from store.state.ledger import MemoryLedger
from store.vectors.backends import memory_store
from tests.backends import unique_name
from tests.fake_openai import FakeOpenAI, settings_for
from worker.chunking import Chunker
from worker.pipeline import Document, Indexer, Recipe
from worker.sources.push import PushSource
from worker.sources.python import PythonSource

RECORDS: dict[str, dict[str, Any]] = {}


def load_records(ids: list[str] | None) -> Iterable[dict[str, Any]]:
    """The Python source these tests configure: ``load_records`` of this module."""
    return [r for key, r in RECORDS.items() if ids is None or key in ids]


class CountingEmbeddings(Embeddings):
    def __init__(self, inner: Embeddings) -> None:
        super().__init__(inner.chain, cache=None)
        self.texts: list[str] = []

    def embed_many_with_models(self, texts: Any, *, reuse: Any = None, scope: str = "") -> Any:
        self.texts.extend(texts)
        return super().embed_many_with_models(texts, reuse=reuse, scope=scope)


@pytest.fixture
def ledger() -> MemoryLedger:
    return MemoryLedger()


def make_indexer(
    ledger: MemoryLedger, *, source: Any = None, chain: Settings | None = None, like: Indexer | None = None
) -> tuple[Indexer, CountingEmbeddings]:
    """An Indexer over a fresh memory collection (``like``'s collection if given); without ``source`` its
    records are pushed; ``chain``: settings whose embedding chain it embeds with (the fake model if None)."""
    settings = chain or Settings.model_validate(
        {"vectors": {"store": "memory", "dimensions": 16}, "embeddings": {"cache_ttl_days": 0}}
    )
    embeddings = CountingEmbeddings(Embeddings.from_settings(settings))
    name = like.name if like else unique_name()
    collection = like.collection if like else memory_store(dimensions=16).get_collection(name, create=True)
    indexer = Indexer(
        name=name,
        collection=collection,
        source=source or PushSource(name),
        recipe=Recipe(Chunker(max_tokens=8, overlap=2), embeddings),
        ledger=ledger,
    )
    return indexer, embeddings


def test_python_source_index_skip_and_delete(ledger: MemoryLedger) -> None:
    RECORDS.clear()
    RECORDS.update(
        {
            "a": {"id": "a", "text": "alpha beta gamma delta " * 5, "metadata": {"kind": "x"}},
            "b": {"id": "b", "text": "short", "metadata": {"kind": "y"}},
        }
    )
    indexer, embeddings = make_indexer(ledger, source=PythonSource(loader=f"{__name__}:load_records"))
    first = indexer.index(["a", "b", "missing"])
    assert sorted(first.indexed) == ["a", "b"] and first.deleted == ["missing"]
    chunks = indexer.collection.count(Filter.eq("record_id", "a"))
    assert chunks > 1 and indexer.collection.count(Filter.eq("record_id", "b")) == 1
    sent = len(embeddings.texts)

    again = indexer.index(["a", "b"])
    assert sorted(again.skipped) == ["a", "b"] and len(embeddings.texts) == sent

    RECORDS["a"]["text"] = "now short"
    del RECORDS["b"]
    third = indexer.index(["a", "b"])
    assert third.indexed == ["a"] and third.deleted == ["b"]
    assert indexer.collection.count(Filter.eq("record_id", "a")) == 1  # no stale chunk left
    assert indexer.collection.count() == 1


def test_pushed_documents_newest_version_wins(ledger: MemoryLedger) -> None:
    indexer, _ = make_indexer(ledger)
    indexer.index_documents([Document("d1", "the newer text", {"v": 2}, version=20)])
    stale = indexer.index_documents([Document("d1", "an older push arriving late", {"v": 1}, version=10)])
    assert stale.skipped == ["d1"]
    [match] = indexer.collection.search([1.0] * 16, filter=Filter.eq("record_id", "d1"))
    assert match.metadata["v"] == 2
    indexer.delete_documents(["d1"], version=21)
    assert indexer.collection.count() == 0


def test_a_collection_without_a_source_cannot_be_read_by_id(ledger: MemoryLedger) -> None:
    indexer, _ = make_indexer(ledger)
    with pytest.raises(ConfigError, match="has no source to read records from"):
        indexer.index(["1"])


def test_a_bad_python_loader_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="source.loader 'nope' is not 'module:function'"):
        PythonSource(loader="nope")
    with pytest.raises(ConfigError, match="cannot be loaded"):
        PythonSource(loader=f"{__name__}:no_such_function")


def test_one_record_with_unencodable_metadata_fails_alone(ledger: MemoryLedger) -> None:
    RECORDS.clear()
    RECORDS.update(
        {
            "ok": {"id": "ok", "text": "fine text", "metadata": {"n": 1}},
            "bad": {"id": "bad", "text": "also text", "metadata": {"n": float("nan")}},
        }
    )
    indexer, _ = make_indexer(ledger, source=PythonSource(loader=f"{__name__}:load_records"))
    result = indexer.index(["ok", "bad"])
    assert result.indexed == ["ok"]
    assert list(result.failed) == ["bad"] and "cannot be encoded as JSON" in result.failed["bad"]


def test_a_declared_field_of_another_type_fails_its_record_alone_before_any_embedding(ledger: MemoryLedger) -> None:
    RECORDS.clear()
    RECORDS.update(
        {
            "ok": {"id": "ok", "text": "fine text", "metadata": {"owner_id": 1}},
            "bad": {"id": "bad", "text": "never embedded", "metadata": {"owner_id": "seven"}},
        }
    )
    indexer, embeddings = make_indexer(ledger, source=PythonSource(loader=f"{__name__}:load_records"))
    indexer.collection.declare_indexes({"owner_id": "integer"})
    result = indexer.index(["ok", "bad"])
    assert result.indexed == ["ok"]
    assert "metadata field 'owner_id' = 'seven' is not a single integer" in result.failed["bad"]
    assert embeddings.texts == ["fine text"]


def test_python_source_pages_ids_in_order_loading_them_once_per_sweep() -> None:
    RECORDS.clear()
    RECORDS.update({f"r{i:02d}": {"id": f"r{i:02d}", "text": "t"} for i in range(25)})
    source = PythonSource(loader=f"{__name__}:load_records")
    pages, after = [], None
    while page := source.page_ids(after=after, limit=10):
        pages.append(page)
        after = page[-1]
    assert [len(p) for p in pages] == [10, 10, 5]
    assert [i for p in pages for i in p] == sorted(RECORDS)


def test_pushes_and_deletes_arriving_out_of_order_leave_the_newest(ledger: MemoryLedger) -> None:
    indexer, _ = make_indexer(ledger)

    def text_of(doc_id: str) -> list[str]:
        return [m.text for m in indexer.collection.search([1.0] * 16, filter=Filter.eq("record_id", doc_id))]

    indexer.index_documents([Document("d", "alpha", version=10)])
    indexer.index_documents([Document("d", "alpha", version=30)])  # same content, newer: remembered
    assert indexer.index_documents([Document("d", "beta", version=20)]).skipped == ["d"]  # late and older
    assert text_of("d") == ["alpha"]

    assert indexer.delete_documents(["d"], version=40).deleted == ["d"]
    assert indexer.index_documents([Document("d", "gamma", version=35)]).skipped == ["d"]  # older than the delete
    assert text_of("d") == []
    assert indexer.delete_documents(["e"], version=5).deleted == ["e"]  # never pushed: a tombstone all the same
    indexer.index_documents([Document("d", "delta", version=50)])
    assert text_of("d") == ["delta"]
    assert indexer.delete_documents(["d"], version=45).superseded == ["d"]  # a delete older than the push
    assert text_of("d") == ["delta"]


def test_a_record_is_embedded_again_when_another_endpoint_serves_its_model(ledger: MemoryLedger) -> None:
    """Audit defect: the ledger's "unchanged" check compared model names only, so a chain moved to a server
    with other weights under the same name skipped every record and kept the old server's vectors."""
    RECORDS.clear()
    RECORDS.update({"a": {"id": "a", "text": "alpha beta gamma", "metadata": {}}})
    source = PythonSource(loader=f"{__name__}:load_records")
    with FakeOpenAI(dimensions=16) as first, FakeOpenAI(dimensions=16, dense=True) as second:
        old, _ = make_indexer(ledger, source=source, chain=settings_for(first, dimensions=16))
        assert old.index(["a"]).indexed == ["a"]
        new, embeddings = make_indexer(ledger, source=source, chain=settings_for(second, dimensions=16), like=old)
        assert new.index(["a"]).indexed == ["a"] and embeddings.texts == ["alpha beta gamma"]
        assert new.index(["a"]).skipped == ["a"]  # and once only
        assert second.calls == 1


def test_a_metadata_only_edit_buys_no_vector_and_an_edit_buys_only_its_new_chunks(ledger: MemoryLedger) -> None:
    """With no embedding cache (expired, flushed or off), a record whose text a change left as it was re-embedded
    every chunk: the store held those vectors all along (issue: vectors never bought twice)."""
    RECORDS.clear()
    words = [f"word{i}" for i in range(40)]
    RECORDS["a"] = {"id": "a", "text": " ".join(words), "metadata": {"kind": "x"}}
    indexer, embeddings = make_indexer(ledger, source=PythonSource(loader=f"{__name__}:load_records"))
    assert indexer.embeddings.cache is None
    indexer.index(["a"])
    chunks = {c.text for c in indexer.collection.chunks_of("a")}
    calls = sum(embeddings.stats.calls.values())

    RECORDS["a"]["metadata"] = {"kind": "y"}
    assert indexer.index(["a"]).indexed == ["a"]
    assert sum(embeddings.stats.calls.values()) == calls and embeddings.stats.reused == len(chunks)
    assert {m.metadata["kind"] for m in indexer.collection.search([1.0] * 16, filter=Filter.eq("record_id", "a"))} == {
        "y"
    }

    RECORDS["a"]["text"] = " ".join([*words[:-3], "changed", "at", "end"])
    indexer.index(["a"])
    now = {c.text for c in indexer.collection.chunks_of("a")}
    assert embeddings.stats.reused == len(chunks) + len(now & chunks)  # the unchanged chunks, from the store
    assert sum(embeddings.stats.calls.values()) == calls + 1  # the new chunks alone, in one call
    assert 0 < len(now - chunks) < len(now)
