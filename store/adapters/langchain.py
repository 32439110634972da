"""LangChain over a vectorsync collection: a retriever, a vector store and embeddings (``vectorsync[langchain]``).

    from store.adapters.langchain import VectorsyncRetriever, VectorsyncVectorStore

    retriever = VectorsyncRetriever(collection="activity_notes", k=5, filter={"workspace_id": 7})
    retriever.invoke("onboarding delays")                       # Documents, best first
    retriever.invoke("onboarding delays", k=2, filter={"kind": "call"})   # narrower, never wider

    notes = VectorsyncVectorStore("scratch")                    # the collection's own embeddings
    notes.add_documents(docs, ids=["a", "b"])                   # again with the same ids: replaced, not added
    notes.similarity_search("pricing", k=3, filter={"kind": "email"})

The retriever reads what the workers index: each Document is one chunk, its ``id`` the chunk's
(``42:0``) and its metadata the chunk's, ``record_id`` and ``chunk`` included. The vector store writes
straight into the collection, one record per Document (no chunking: split before, as LangChain does), so
a Document comes back as it went in. Both take ``client`` (default: this process's default client), read a
collection's live generation, and honour its ``required_filter``: a ``filter`` given when they are built
is ANDed with each call's (``store.adapters.base``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore
from pydantic import ConfigDict, Field

from store.adapters.base import FilterLike, asearch, merged, search
from store.client import Client
from store.errors import ConfigError
from store.process.defaults import default_client
from store.vectors.base import DEFAULT_LIMIT, MAX_LIMIT, Collection, QueryEmbedder
from store.vectors.filters import Filter
from store.vectors.modes import SearchMode
from store.vectors.records import VectorMatch, VectorRecord
from store.vectors.tenancy import check_scoped

__all__ = ["VectorsyncEmbeddings", "VectorsyncRetriever", "VectorsyncVectorStore", "document", "embed_many"]

#: Keyword arguments of ``invoke`` that LangChain itself reads, never search options.
_LANGCHAIN_KWARGS = ("verbose",)


def document(match: VectorMatch) -> Document:
    """A match as a Document: the id, text and metadata stored. A record the vector store wrote (one chunk,
    ``record_id`` its own id) comes back without the ``record_id`` and ``chunk`` it was stored with."""
    metadata = dict(match.metadata)
    if metadata.get("record_id") == match.id and metadata.get("chunk") == 0:
        del metadata["record_id"], metadata["chunk"]
    return Document(id=match.id, page_content=match.text, metadata=metadata)


class VectorsyncRetriever(BaseRetriever):
    """The ``k`` chunks of ``collection`` closest to a query, as Documents.

    ``filter`` (a Filter or its JSON form) holds for every call; ``invoke(query, k=..., filter=...)``
    overrides ``k`` and ANDs its filter in. ``mode`` is the search mode (``vector``, ``keyword``, ``hybrid``;
    None: the collection's ``search.mode``); ``invoke(query, mode=...)`` overrides it. ``search_kwargs`` and any
    other keyword of ``invoke`` go to ``Client.search`` as they are (``min_score`` today). Raises ConfigError
    (a bad filter, or one that does not pin the collection's ``required_filter``), StoreUnavailable, EmbeddingError.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    collection: str
    k: int = DEFAULT_LIMIT
    filter: Filter | dict[str, Any] | None = None
    mode: SearchMode | None = None
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    client: Client | None = Field(default=None, exclude=True)

    def _options(self, kwargs: dict[str, Any]) -> tuple[int, FilterLike | None, dict[str, Any]]:
        for name in _LANGCHAIN_KWARGS:
            kwargs.pop(name, None)
        chosen = {"mode": self.mode} if self.mode is not None else {}
        return kwargs.pop("k", self.k), kwargs.pop("filter", None), {**chosen, **self.search_kwargs, **kwargs}

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        k, call_filter, options = self._options(kwargs)
        matches = search(self, query, filter=call_filter, limit=k, options=options)
        return [document(m) for m in matches]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        k, call_filter, options = self._options(kwargs)
        matches = await asearch(self, query, filter=call_filter, limit=k, options=options)
        return [document(m) for m in matches]


class VectorsyncEmbeddings(Embeddings):
    """vectorsync's embeddings (the cache, then the failover chain) as LangChain Embeddings.

    ``embedder`` is an ``store.embeddings.Embeddings`` (default: the default client's) or a collection's
    query embedder. Raises what ``Embeddings.embed_many`` raises.
    """

    def __init__(self, embedder: QueryEmbedder | None = None) -> None:
        self._embedder = embedder

    @property
    def embedder(self) -> QueryEmbedder:
        return self._embedder if self._embedder is not None else default_client().embeddings

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, vector)) for vector in embed_many(self.embedder, texts)]

    def embed_query(self, text: str) -> list[float]:
        return list(map(float, self.embedder.embed(text)))


def embed_many(embedder: QueryEmbedder, texts: list[str]) -> Sequence[Sequence[float]]:
    """``texts`` embedded in one call where ``embedder`` can (``Embeddings.embed_many``: batched, cached)."""
    many: Callable[[list[str]], Sequence[Sequence[float]]] | None = getattr(embedder, "embed_many", None)
    return many(texts) if many is not None else [embedder.embed(text) for text in texts]


class VectorsyncVectorStore(VectorStore):
    """A vectorsync collection as a LangChain VectorStore: add, replace, delete and get Documents by id.

    ``embedding`` None embeds with the collection's own model (the one its searches embed queries with);
    a LangChain ``Embeddings`` is used for documents and queries alike instead, and the collection's
    ``vectors.dimensions`` must be its size. ``filter`` holds for every search, ``get_by_ids`` and
    ``delete``. The async methods run the sync ones in a worker thread, as ``store.query``'s twins do.
    """

    def __init__(
        self,
        collection: str,
        *,
        client: Client | None = None,
        embedding: Embeddings | None = None,
        filter: FilterLike | None = None,
    ) -> None:
        self.collection = collection
        self.filter = filter
        self._client = client
        self._embedding = embedding

    @property
    def client(self) -> Client:
        return self._client or default_client()

    @property
    def embeddings(self) -> Embeddings:
        return self._embedding or VectorsyncEmbeddings(self._open().embedder)

    def _open(self) -> Collection:
        return self.client.get_collection(self.collection)

    # -- writes ------------------------------------------------------------------------

    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """Store each Document as one record (its text embedded as it is) and return the ids: ``ids=`` if
        given, else each Document's ``id``, else a new UUID. An id stored already is replaced, so adding the
        same Documents twice stores them once. Raises ConfigError (nothing written), StoreUnavailable,
        EmbeddingError."""
        ids = _ids(documents, kwargs.pop("ids", None))
        target = self._open()
        scope = self._scope(target)
        outside = [
            id for id, doc in zip(ids, documents, strict=True) if scope and not scope.matches(_stored(doc.metadata, id))
        ]
        if outside:
            raise ConfigError(
                f"documents {', '.join(map(repr, outside[:5]))} are outside this store's filter "
                f"{json.dumps(scope.to_dict()) if scope else ''}: collection {target.name!r} keeps each tenant's "
                f"records apart (required filter {', '.join(target.required_filter)}); give each Document that "
                "metadata, or add them through a store built with their filter"
            )
        texts = [doc.page_content for doc in documents]
        vectors = self._embed(target, texts)
        target.upsert_many(
            [
                VectorRecord(
                    id=id,
                    embedding=vector,
                    text=doc.page_content,
                    metadata=_stored(doc.metadata, id),
                    model=getattr(vector, "model", ""),
                )
                for id, doc, vector in zip(ids, documents, vectors, strict=True)
            ]
        )
        return ids

    def _embed(self, target: Collection, texts: list[str]) -> Sequence[Sequence[float]]:
        if self._embedding is not None:
            return self._embedding.embed_documents(texts)
        if target.embedder is None:
            raise ConfigError(
                f"collection {target.name!r} has no embeddings to embed documents with: pass "
                "embedding= (LangChain Embeddings), or build the store from settings"
            )
        return embed_many(target.embedder, texts)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool:
        """Delete the records ``ids`` (every chunk of each: a worker's chunks ``42:0``, ``42:1`` go with
        ``"42"``); ids not stored are no error. ``ids=None`` is refused rather than emptying the collection.
        Raises ConfigError, StoreUnavailable."""
        if ids is None:
            raise ConfigError(
                f"delete() needs the ids to delete; to empty collection {self.collection!r} use "
                f"Client.collections.reset({self.collection!r}) (vectorsync collections reset "
                f"{self.collection})"
            )
        target = self._open()
        self._scope(target)
        for batch in _batches(ids, target):
            target.delete_where(self._records(batch))
        return True

    def _scope(self, target: Collection) -> Filter | None:
        """The store's filter, checked to pin the collection's required filter (a write or read by id of
        another tenant's record is refused as its search is). Raises ConfigError."""
        scope = merged(self.filter, None)
        check_scoped(target.name, target.required_filter, scope)
        return scope if target.required_filter else None

    def _records(self, ids: list[str]) -> Filter:
        """The records ``ids``, within the store's ``filter``."""
        records = Filter.any_of("record_id", ids)
        scope = merged(self.filter, None)
        return records if scope is None else scope & records

    # -- reads -------------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored Documents of ``ids`` (each chunk of a worker's record), in the order of ``ids``; ids
        not stored are left out. Raises ConfigError, StoreUnavailable."""
        target = self._open()
        found: dict[str, list[VectorMatch]] = {}
        for batch in _batches(ids, target):
            where = self._records(batch)
            count = target.count(where)
            # No read by id on the Collection seam: a filtered search returns every match, each exactly once.
            if count:
                probe = [1.0] + [0.0] * (target.dimensions - 1)
                for match in target.search(probe, filter=where, limit=min(count, MAX_LIMIT)):
                    found.setdefault(str(match.metadata.get("record_id", match.id)), []).append(match)
        ordered = [m for id in dict.fromkeys(ids) for m in sorted(found.get(id, []), key=_chunk)]
        return [document(m) for m in ordered]

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        """The ``k`` Documents closest to ``query``; ``filter=`` ANDed with the store's; other keywords go to
        ``Client.search``. Raises ConfigError, StoreUnavailable, EmbeddingError."""
        return [doc for doc, _ in self.similarity_search_with_score(query, k, **kwargs)]

    def similarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[Document, float]]:
        """``similarity_search`` with each score: higher is closer (cosine similarity, dot product, or
        1/(1+distance))."""
        vector = self._embedding.embed_query(query) if self._embedding is not None else None
        return self._search(query if vector is None else vector, k, kwargs)

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self._search(embedding, k, kwargs)]

    def _search(self, query: str | Sequence[float], k: int, kwargs: dict[str, Any]) -> list[tuple[Document, float]]:
        call_filter = kwargs.pop("filter", None)
        matches = search(self, query, filter=call_filter, limit=k, options=kwargs)
        return [(document(m), m.score) for m in matches]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        if self._open().metric == "cosine":
            return lambda score: (1.0 + score) / 2.0  # cosine similarity, -1 to 1, onto LangChain's 0 to 1
        return lambda score: score

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        collection: str | None = None,
        client: Client | None = None,
        **kwargs: Any,
    ) -> VectorsyncVectorStore:
        """A store over ``collection`` with ``texts`` added. Raises ConfigError without ``collection``."""
        if collection is None:
            raise ConfigError("from_texts() needs collection=: the name of a declared or existing collection")
        store = cls(collection, client=client, embedding=embedding, filter=kwargs.pop("filter", None))
        store.add_texts(texts, metadatas, ids=ids)
        return store


def _ids(documents: list[Document], given: Iterable[str | None] | None) -> list[str]:
    ids = list(given) if given is not None else [doc.id for doc in documents]
    if len(ids) != len(documents):
        raise ConfigError(f"{len(ids)} ids for {len(documents)} documents: pass one id per document, or none")
    return [str(id) if id is not None else str(uuid.uuid4()) for id in ids]


def _stored(metadata: Mapping[str, Any], id: str) -> dict[str, Any]:
    """The metadata a Document is stored with: its own, and the ``record_id`` and ``chunk`` every record of
    a collection carries (what ``delete`` and ``get_by_ids`` find it by)."""
    if metadata.get("record_id", id) != id or metadata.get("chunk", 0) != 0:
        raise ConfigError(
            f"document {id!r} has metadata record_id={metadata.get('record_id')!r}, "
            f"chunk={metadata.get('chunk')!r}: those keys are vectorsync's (the record and chunk a "
            "stored chunk belongs to); rename them, or drop them when adding a search's Documents"
        )
    return {**metadata, "record_id": id, "chunk": 0}


def _batches(ids: Sequence[str], target: Collection) -> Iterable[list[str]]:
    """``ids`` once each, in lists of half a filter's cap on values (the other half is left to ``filter``)."""
    unique = list(dict.fromkeys(str(id) for id in ids))
    size = max(1, target.limits.max_filter_terms // 2)
    for start in range(0, len(unique), size):
        yield unique[start : start + size]


def _chunk(match: VectorMatch) -> int:
    chunk = match.metadata.get("chunk")
    return chunk if isinstance(chunk, int) else 0
