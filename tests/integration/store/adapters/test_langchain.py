"""LangChain: langchain-tests' standard suites, unmodified (only the fixtures they ask for), then our own.

``RetrieversIntegrationTests`` runs the retriever over documents the worker's own task code indexed
(``producer.testing``); ``VectorStoreIntegrationTests`` runs the vector store, sync and async, on memory and
on pgvector with the suite's embeddings, and on memory with the collection's own model.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests, VectorStoreIntegrationTests
from langchain_tests.integration_tests.vectorstores import EMBEDDING_SIZE

from producer import index_document, testing
from store import Client, ConfigError, Filter, Settings
from store.adapters.langchain import VectorsyncEmbeddings, VectorsyncRetriever, VectorsyncVectorStore
from tests.backends import unique_name

NOTES = {
    "n1": ("Dana asked to move the onboarding call to Monday", {"kind": "call", "workspace": 1}),
    "n2": ("The onboarding checklist is missing the security review", {"kind": "email", "workspace": 1}),
    "n3": ("Renewal pricing: a ten percent discount for two years", {"kind": "email", "workspace": 1}),
    "n4": ("Onboarding for the pilot team starts after the budget approval", {"kind": "meeting", "workspace": 2}),
    "n5": ("Support call about the failed data migration and the rollout timeline", {"kind": "call", "workspace": 2}),
}
#: A collection of pushed notes, tenant-scoped like a real one (``required_filter``), and one that is not.
KIT_SETTINGS = {
    "vectors": {"dimensions": 64},
    "collections": {
        "notes": {"source": {"kind": "push"}, "search": {"keywords": True}},
        "scoped": {"source": {"kind": "push"}, "required_filter": ["workspace"]},
        "long": {"source": {"kind": "push"}, "chunker": {"max_tokens": 12, "overlap": 2}},
    },
}


@pytest.fixture(scope="module")
def indexed() -> Iterator[testing.TaskQueue]:
    """The notes pushed and indexed by the worker's task code; the default client reads them."""
    with testing.queue(KIT_SETTINGS) as tasks:
        for id, (text, metadata) in NOTES.items():
            index_document("notes", id, text, metadata)
            index_document("scoped", id, text, metadata)
        index_document(
            "long",
            "essay",
            " ".join(f"Paragraph {i} on onboarding, pricing and renewals." * 2 for i in range(6)),
            {"kind": "essay"},
        )
        tasks.run_queue()
        yield tasks


class TestRetrieverStandard(RetrieversIntegrationTests):
    @pytest.fixture(autouse=True)
    def _notes(self, indexed: testing.TaskQueue) -> None:
        """The collection the retriever reads (the suite builds retrievers itself, from the properties)."""

    @property
    def retriever_constructor(self) -> type[VectorsyncRetriever]:
        return VectorsyncRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, object]:
        return {"collection": "notes"}

    @property
    def retriever_query_example(self) -> str:
        return "onboarding call"


def _store(client: Client, *, embedding: bool = True) -> Iterator[VectorStore]:
    name = unique_name("lc")
    client.collections.create(name)
    try:
        yield VectorsyncVectorStore(
            name, client=client, embedding=VectorStoreIntegrationTests.get_embeddings() if embedding else None
        )
    finally:
        client.collections.drop(name)
        client.close()


class TestMemoryVectorStoreStandard(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self) -> Iterator[VectorStore]:
        yield from _store(Client(Settings(vectors={"store": "memory", "dimensions": EMBEDDING_SIZE})))


class TestPgvectorVectorStoreStandard(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, postgres_url: str) -> Iterator[VectorStore]:
        settings = Settings(vectors={"store": "pgvector", "url": postgres_url, "dimensions": EMBEDDING_SIZE})
        yield from _store(Client(settings))


class TestCollectionModelVectorStoreStandard(VectorStoreIntegrationTests):
    """The collection's own model (``fake``, 64-d) instead of the suite's embeddings."""

    @pytest.fixture
    def vectorstore(self) -> Iterator[VectorStore]:
        yield from _store(Client(Settings(vectors={"store": "memory", "dimensions": 64})), embedding=False)


# -- the retriever: filter, k, required_filter, options -----------------------------------------------


def ids(documents: list[Document]) -> list[str | None]:
    return [doc.id for doc in documents]


def test_each_document_is_a_chunk_with_its_record_and_metadata(indexed: testing.TaskQueue) -> None:
    [best] = VectorsyncRetriever(collection="notes", k=1).invoke("move the onboarding call")
    assert best == Document(
        id="n1:0", page_content=NOTES["n1"][0], metadata={"kind": "call", "workspace": 1, "record_id": "n1", "chunk": 0}
    )
    chunks = VectorsyncRetriever(collection="long", k=50).invoke("onboarding")
    assert len(chunks) > 1 and {doc.metadata["record_id"] for doc in chunks} == {"essay"}
    assert sorted(doc.metadata["chunk"] for doc in chunks) == list(range(len(chunks)))


def test_a_built_in_filter_holds_and_a_call_narrows_it(indexed: testing.TaskQueue) -> None:
    retriever = VectorsyncRetriever(collection="notes", filter={"workspace": 1})
    assert sorted(ids(retriever.invoke("onboarding"))) == ["n1:0", "n2:0", "n3:0"]
    assert ids(retriever.invoke("onboarding", filter={"kind": "call"})) == ["n1:0"]
    assert ids(retriever.invoke("onboarding", filter={"workspace": 2})) == []  # ANDed: never wider
    by_filter = VectorsyncRetriever(collection="notes", filter=Filter.eq("kind", "call"), k=1)
    assert ids(by_filter.invoke("data migration")) == ["n5:0"]


def test_a_required_filter_is_honoured(indexed: testing.TaskQueue) -> None:
    with pytest.raises(
        ConfigError,
        match=r"^collection 'scoped' is searched only with an equality filter on "
        r"workspace \(collections.scoped.required_filter\), but the search has no "
        r"filter",
    ):
        VectorsyncRetriever(collection="scoped").invoke("onboarding")
    scoped = VectorsyncRetriever(collection="scoped", filter={"workspace": 2})
    assert sorted(ids(scoped.invoke("onboarding"))) == ["n4:0", "n5:0"]
    assert ids(VectorsyncRetriever(collection="scoped").invoke("onboarding", filter={"workspace": 2}, k=1)) == ["n4:0"]


async def test_the_async_path_takes_the_same_options(indexed: testing.TaskQueue) -> None:
    retriever = VectorsyncRetriever(collection="notes", filter={"workspace": 1}, k=2)
    assert ids(await retriever.ainvoke("onboarding", filter={"kind": "email"}, k=1)) == ["n2:0"]


def test_search_options_pass_through_to_client_search(indexed: testing.TaskQueue) -> None:
    scores = [m.score for m in indexed.client.search("notes", "onboarding")]
    threshold = scores[1]
    retriever = VectorsyncRetriever(collection="notes", search_kwargs={"min_score": threshold})
    assert len(retriever.invoke("onboarding")) == sum(score >= threshold for score in scores)
    best = VectorsyncRetriever(collection="notes").invoke("onboarding", min_score=scores[0])
    assert len(best) == sum(score >= scores[0] for score in scores)
    with pytest.raises(TypeError, match="boost"):  # an option search does not take is not silently dropped
        VectorsyncRetriever(collection="notes", search_kwargs={"boost": 2}).invoke("onboarding")


def test_the_retriever_takes_a_search_mode(indexed: testing.TaskQueue) -> None:
    for mode in ("keyword", "hybrid"):
        expected = [m.id for m in indexed.client.search("notes", "onboarding call", mode=mode, limit=3)]
        assert ids(VectorsyncRetriever(collection="notes", k=3, mode=mode).invoke("onboarding call")) == expected
        assert ids(VectorsyncRetriever(collection="notes", k=3).invoke("onboarding call", mode=mode)) == expected
    with pytest.raises(ConfigError, match="search mode 'fuzzy' is not allowed"):
        VectorsyncRetriever(collection="notes").invoke("onboarding", mode="fuzzy")


# -- the vector store: what the standard suites do not ask -----------------------------------------------


@pytest.fixture
def memory_store() -> Iterator[VectorStore]:
    yield from _store(Client(Settings(vectors={"store": "memory", "dimensions": 64})), embedding=False)


def test_the_store_filter_scopes_searches_gets_and_deletes(memory_store: VectorsyncVectorStore) -> None:
    memory_store.add_texts(
        ["onboarding call", "onboarding email"], [{"workspace": 1}, {"workspace": 2}], ids=["a", "b"]
    )
    scoped = VectorsyncVectorStore(memory_store.collection, client=memory_store.client, filter={"workspace": 1})
    assert ids(scoped.similarity_search("onboarding")) == ["a"]
    assert ids(scoped.get_by_ids(["a", "b"])) == ["a"]
    scoped.delete(["a", "b"])
    assert ids(memory_store.get_by_ids(["a", "b"])) == ["b"]
    assert ids(memory_store.similarity_search("onboarding", filter={"workspace": 2})) == ["b"]


def test_vectorsync_metadata_keys_and_delete_without_ids_are_refused(memory_store: VectorsyncVectorStore) -> None:
    with pytest.raises(
        ConfigError,
        match=r"^document 'x' has metadata record_id='y', chunk=None: those keys are "
        r"vectorsync's",
    ):
        memory_store.add_documents([Document(page_content="t", metadata={"record_id": "y"})], ids=["x"])
    with pytest.raises(
        ConfigError,
        match=r"^delete\(\) needs the ids to delete; to empty collection 'lc_\d+_\d+' "
        r"use Client.collections.reset",
    ):
        memory_store.delete()
    assert memory_store.get_by_ids(["x"]) == []


def test_relevance_scores_are_from_0_to_1_and_as_retriever_searches(memory_store: VectorsyncVectorStore) -> None:
    memory_store.add_texts(["onboarding call", "pricing and discounts"], ids=["a", "b"])
    scored = memory_store.similarity_search_with_relevance_scores("onboarding call", k=2)
    assert [doc.id for doc, _ in scored] == ["a", "b"]
    assert scored[0][1] == pytest.approx(1.0) and 0.0 <= scored[1][1] < 1.0
    assert ids(memory_store.as_retriever(search_kwargs={"k": 1}).invoke("pricing")) == ["b"]


def test_the_collections_model_is_langchain_embeddings_too(memory_store: VectorsyncVectorStore) -> None:
    embeddings = memory_store.embeddings
    assert isinstance(embeddings, VectorsyncEmbeddings)
    query = embeddings.embed_query("onboarding call")
    assert len(query) == 64 and embeddings.embed_documents(["onboarding call", "pricing"])[0] == query
    memory_store.add_texts(["onboarding call"], ids=["a"])
    [(_, score)] = memory_store.similarity_search_with_score("onboarding call", k=1)
    assert score == pytest.approx(1.0)  # the documents were embedded by the model the queries are


def test_records_the_worker_chunked_are_deleted_and_got_whole(indexed: testing.TaskQueue) -> None:
    index_document("long", "memo", " ".join(f"Memo line {i} about the security review." for i in range(12)))
    indexed.run_queue()
    store = VectorsyncVectorStore("long")
    chunks = store.get_by_ids(["memo", "missing"])
    assert len(chunks) > 1 and [doc.metadata["chunk"] for doc in chunks] == list(range(len(chunks)))
    assert all(doc.id == f"memo:{doc.metadata['chunk']}" for doc in chunks)
    store.delete(["memo"])
    assert store.get_by_ids(["memo"]) == []
    assert {doc.metadata["record_id"] for doc in store.similarity_search("security review", k=50)} == {"essay"}
