"""LlamaIndex: the retriever inside llama-index-core's own RetrieverQueryEngine, offline with its MockLLM.

MockLLM answers with the prompt it was given, so the answer shows which passages reached the LLM.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore

from producer import index_document, testing
from store import ConfigError, Filter
from store.adapters.llamaindex import VectorsyncRetriever

NOTES = {
    "n1": ("Dana asked to move the onboarding call to Monday", {"kind": "call", "workspace": 1}),
    "n2": ("The onboarding checklist is missing the security review", {"kind": "email", "workspace": 1}),
    "n3": ("Onboarding for the pilot team starts after the budget approval", {"kind": "meeting", "workspace": 2}),
}
SETTINGS = {
    "vectors": {"dimensions": 64},
    "collections": {
        "notes": {"source": {"kind": "push"}, "search": {"keywords": True}},
        "scoped": {"source": {"kind": "push"}, "required_filter": ["workspace"]},
    },
}


@pytest.fixture(scope="module")
def indexed() -> Iterator[testing.TaskQueue]:
    with testing.queue(SETTINGS) as tasks:
        for id, (text, metadata) in NOTES.items():
            index_document("notes", id, text, metadata)
            index_document("scoped", id, text, metadata)
        tasks.run_queue()
        yield tasks


def test_the_query_engine_answers_from_the_filtered_passages(indexed: testing.TaskQueue) -> None:
    retriever = VectorsyncRetriever("notes", filter={"kind": "call"})
    response = RetrieverQueryEngine.from_args(retriever, llm=MockLLM()).query("When is the onboarding call?")
    assert [n.node.node_id for n in response.source_nodes] == ["n1:0"]
    assert NOTES["n1"][0] in str(response) and NOTES["n2"][0] not in str(response)
    assert "record_id" not in str(response)  # bookkeeping stays out of the prompt; "kind: call" is in it
    assert "kind: call" in str(response)


def test_each_node_carries_its_record_id_metadata_and_score(indexed: testing.TaskQueue) -> None:
    nodes = VectorsyncRetriever("notes", similarity_top_k=3).retrieve("onboarding call")
    best: NodeWithScore = nodes[0]
    assert best.node.node_id == "n1:0"
    assert best.node.source_node is not None and best.node.source_node.node_id == "n1"
    assert best.node.metadata == {"kind": "call", "workspace": 1, "record_id": "n1", "chunk": 0}
    assert best.node.get_content(metadata_mode=MetadataMode.LLM) == f"kind: call\nworkspace: 1\n\n{NOTES['n1'][0]}"
    assert best.score is not None and best.score >= (nodes[1].score or 0.0)
    assert len(VectorsyncRetriever("notes", similarity_top_k=1).retrieve("onboarding")) == 1


def test_the_retriever_takes_a_search_mode(indexed: testing.TaskQueue) -> None:
    for mode in ("keyword", "hybrid"):
        expected = [m.id for m in indexed.client.search("notes", "onboarding call", mode=mode, limit=3)]
        nodes = VectorsyncRetriever("notes", similarity_top_k=3, mode=mode).retrieve("onboarding call")
        assert [n.node.node_id for n in nodes] == expected


async def test_the_async_path_and_a_required_filter(indexed: testing.TaskQueue) -> None:
    with pytest.raises(
        ConfigError,
        match=r"^collection 'scoped' is searched only with an equality filter on "
        r"workspace",
    ):
        VectorsyncRetriever("scoped").retrieve("onboarding")
    scoped = VectorsyncRetriever("scoped", filter=Filter.eq("workspace", 2))
    assert [n.node.node_id for n in await scoped.aretrieve("onboarding")] == ["n3:0"]
    engine = RetrieverQueryEngine.from_args(VectorsyncRetriever("scoped", filter={"workspace": 1}), llm=MockLLM())
    response = await engine.aquery("onboarding")
    assert sorted(n.node.node_id for n in response.source_nodes) == ["n1:0", "n2:0"]


def test_its_run_options_reach_the_retriever_and_llamaindex_and_an_unknown_one_is_refused(
    indexed: testing.TaskQueue,
) -> None:
    """``client``, ``callback_manager`` and ``verbose`` are keywords of ``RetrieverOptions``: each lands where it
    did as a named parameter, and a keyword outside them is the TypeError of a plain signature."""
    manager = CallbackManager([])
    retriever = VectorsyncRetriever("notes", client=indexed.client, callback_manager=manager, verbose=True)
    assert (retriever.client, retriever.callback_manager, retriever._verbose) == (indexed.client, manager, True)
    assert VectorsyncRetriever("notes")._verbose is False
    assert [n.node.node_id for n in retriever.retrieve("onboarding call")][:1] == ["n1:0"]
    with pytest.raises(TypeError, match=r"^VectorsyncRetriever.__init__\(\) got an unexpected keyword argument 'k'$"):
        VectorsyncRetriever("notes", k=3)
