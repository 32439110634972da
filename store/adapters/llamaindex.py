"""LlamaIndex over a vectorsync collection: a retriever of ``NodeWithScore`` (``vectorsync[llamaindex]``).

    from llama_index.core.query_engine import RetrieverQueryEngine
    from store.adapters.llamaindex import VectorsyncRetriever

    retriever = VectorsyncRetriever("activity_notes", similarity_top_k=5, filter={"workspace_id": 7})
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
    engine.query("Why is Dana's onboarding late?").source_nodes     # the chunks the answer was built from

Each node is one chunk as the workers stored it: ``node.id_`` the chunk's id (``42:0``), its source node
the record (``node.source_node.node_id == "42"``, also ``metadata["record_id"]``), its metadata the chunk's
and its score the search's (higher is closer). ``record_id`` and ``chunk`` are kept out of what the LLM and
an embedding model read of a node. The query's text is embedded with the collection's own model (a
``QueryBundle.embedding`` made by another model would not compare). A ``filter`` given when the retriever is
built is ANDed with each query's (``store.adapters.base``), and the collection's ``required_filter`` holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, Unpack

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode

from store.adapters.base import FilterLike, asearch, search
from store.client import Client
from store.retrieval.options import refuse_unknown
from store.vectors.base import DEFAULT_LIMIT
from store.vectors.modes import SearchMode
from store.vectors.records import VectorMatch

__all__ = ["RetrieverOptions", "VectorsyncRetriever", "node"]

#: Metadata that says where a chunk belongs, not what it is about: neither the LLM nor an embedder reads it.
_BOOKKEEPING = ["record_id", "chunk"]


def node(match: VectorMatch) -> NodeWithScore:
    """A match as a scored TextNode: the chunk's id, text and metadata, its record as the source node."""
    metadata = dict(match.metadata)
    record_id = str(metadata.setdefault("record_id", match.id))
    text = TextNode(
        id_=match.id,
        text=match.text,
        metadata=metadata,
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=record_id)},
        excluded_llm_metadata_keys=list(_BOOKKEEPING),
        excluded_embed_metadata_keys=list(_BOOKKEEPING),
    )
    return NodeWithScore(node=text, score=match.score)


class RetrieverOptions(TypedDict, total=False):
    """How a ``VectorsyncRetriever`` runs, apart from what it searches: ``client`` (None: this process's default
    client), and LlamaIndex's own ``callback_manager`` (None) and ``verbose`` (False), given to BaseRetriever."""

    client: Client | None
    callback_manager: CallbackManager | None
    verbose: bool


class VectorsyncRetriever(BaseRetriever):
    """The ``similarity_top_k`` chunks of ``collection`` closest to a query.

    ``filter`` is a Filter or its JSON form; ``mode`` the search mode (``vector``, ``keyword``, ``hybrid``; None:
    the collection's ``search.mode``); ``search_kwargs`` go to ``Client.search`` as they are (``min_score``
    today); ``options``: ``RetrieverOptions`` (``client``, None: this process's default client). Raises
    ConfigError (a bad filter, or one that does not pin the collection's ``required_filter``), StoreUnavailable,
    EmbeddingError.
    """

    def __init__(
        self,
        collection: str,
        *,
        similarity_top_k: int = DEFAULT_LIMIT,
        filter: FilterLike | None = None,
        search_kwargs: Mapping[str, Any] | None = None,
        mode: SearchMode | None = None,
        **options: Unpack[RetrieverOptions],
    ) -> None:
        refuse_unknown("VectorsyncRetriever.__init__", options, RetrieverOptions.__optional_keys__)
        super().__init__(callback_manager=options.get("callback_manager"), verbose=options.get("verbose", False))
        self.collection = collection
        self.similarity_top_k = similarity_top_k
        self.filter = filter
        self.search_kwargs = {**({"mode": mode} if mode is not None else {}), **dict(search_kwargs or {})}
        self.mode = mode
        self.client = options.get("client")

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        matches = search(self, query_bundle.query_str, limit=self.similarity_top_k, options=self.search_kwargs)
        return [node(m) for m in matches]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        matches = await asearch(self, query_bundle.query_str, limit=self.similarity_top_k, options=self.search_kwargs)
        return [node(m) for m in matches]
