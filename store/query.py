"""Search, rerank and grounded answers from app code and the CLI, over this process's default client.

    from store.query import search, rerank, answer
    search("activity_notes", "onboarding delays", filter={"kind": "call"}, limit=5)
    rerank("onboarding delays", matches, top=3)
    answer("activity_notes", "Why is Dana's onboarding late?", filter={"owner_id": 7})

These are helpers over ``store.process.defaults.default_client()``, built from the
settings on first use, as ``httpx.get`` is over a Client; an app that wants
its own settings or lifetime builds a ``store.Client``. Each has an async twin
(``asearch``, ``arerank``, ``aanswer``) that runs it in a thread. Mixing them up
is a TypeError naming the right call (``store.retrieval.twins``): ``await
search(...)`` names ``asearch``, and the result of ``asearch(...)`` used without
``await`` names ``await asearch(...)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Unpack

from store.errors import ConfigError
from store.process.defaults import default_client
from store.retrieval import GroundedAnswer, Retrieval
from store.retrieval.matches import Matches
from store.retrieval.options import AnswerOptions, SearchOptions, refuse_unknown
from store.retrieval.search import searched
from store.retrieval.twins import Pending, twin
from store.settings import CollectionSettings, Settings
from store.state.generations.routing import open_declared
from store.vectors.backends import open_store
from store.vectors.base import Collection, VectorStore
from store.vectors.records import VectorMatch

__all__ = ["aanswer", "answer", "arerank", "asearch", "open_collection", "rerank", "search", "store_from_settings"]


def store_from_settings(settings: Settings) -> VectorStore:
    """The configured store, with the embeddings chain for text queries (the caller closes both)."""
    from store.embeddings import Embeddings

    return open_store(settings, embedder=Embeddings.from_settings(settings))


def search(
    collection: str, query: str | Sequence[float], *, store: VectorStore | None = None, **options: Unpack[SearchOptions]
) -> Matches:
    """The ``limit`` best matches for a text or vector ``query`` in ``collection``, as a list.

    ``options`` (``SearchOptions``): ``filter`` (a Filter or its JSON form), ``limit`` (10), ``min_score``,
    ``mode`` (``vector``, ``keyword`` or ``hybrid``; None: the collection's ``search.mode``; keyword and hybrid
    need a text). ``collection`` reads its live generation. With ``store``, the name given is read in that store
    as it is: no alias is consulted (pass ``NAME__gN`` for one generation).
    Raises ConfigError, StoreUnavailable, EmbeddingError.
    """
    refuse_unknown("search", options, SearchOptions.__optional_keys__)
    target = default_client().get_collection(collection) if store is None else open_collection(store, collection)
    return searched(target, query, options)


def open_collection(
    store: VectorStore, name: str, *, configured: Mapping[str, CollectionSettings] | None = None
) -> Collection:
    """The collection ``name`` of ``store`` to read: a configured one (created empty if need be), else one that
    exists; no alias is consulted.

    A name that is neither is a ConfigError: reading never creates a table for a typo. A configured
    ``required_filter`` holds even on a store that was not built from the settings. ``configured``: the
    collections of the settings the store was built from (None: the default client's settings).
    """
    return open_declared(store, name, dict(configured) if configured is not None else _configured())


def _configured() -> dict[str, CollectionSettings]:
    try:
        return dict(default_client().settings.collections)
    except ConfigError:
        return {}


def asearch(
    collection: str, query: str | Sequence[float], *, store: VectorStore | None = None, **options: Unpack[SearchOptions]
) -> Pending[Matches]:
    """``search`` without blocking the event loop (it runs in a worker thread): ``await asearch(...)``."""
    refuse_unknown("asearch", options, SearchOptions.__optional_keys__)
    return Pending(asyncio.to_thread(search, collection, query, store=store, **options), "asearch")


def rerank(
    query: str,
    matches: Sequence[VectorMatch],
    *,
    top: int | None = None,
    user: str | None = None,
    retrieval: Retrieval | None = None,
) -> Matches:
    """The ``top`` matches that best answer ``query``, best first, ``score`` the reranker's (0 to 1).

    With no rerank model configured the search order is kept and nothing is called. ``user`` names
    the caller in the cost metrics. Raises ConfigError, ProviderError.
    """
    reranked = (retrieval or default_client().retrieval).rerank(query, matches, top=top, user=user)
    return Matches(reranked, called="rerank")


#: ``rerank`` without blocking the event loop: ``await arerank(...)``.
arerank = twin(rerank)


def answer(
    collection: str, question: str, *, retrieval: Retrieval | None = None, **options: Unpack[AnswerOptions]
) -> GroundedAnswer:
    """Answer ``question`` from the passages of ``collection`` that ``filter`` allows, citing them.

    ``options`` (``AnswerOptions``): retrieves ``candidates`` matches (``retrieval.candidates``) in search
    ``mode`` (None: the collection's), keeps those ``allow(matches)`` returns (the app's access check, before
    any model sees them), reranks them to ``top`` (``retrieval.top``) and asks the chat chain; invented
    citations are dropped and ``answered`` is False, with a reason, when the passages do not hold the answer.
    ``user`` names the caller in the cost metrics. Raises ConfigError, StoreUnavailable, ProviderError.
    """
    refuse_unknown("answer", options, AnswerOptions.__optional_keys__)
    return (retrieval or default_client().retrieval).answer(collection, question, **options)


def aanswer(
    collection: str, question: str, *, retrieval: Retrieval | None = None, **options: Unpack[AnswerOptions]
) -> Pending[GroundedAnswer]:
    """``answer`` without blocking the event loop: ``await aanswer(...)`` (``allow`` runs in the worker thread)."""
    refuse_unknown("aanswer", options, AnswerOptions.__optional_keys__)
    return Pending(asyncio.to_thread(answer, collection, question, retrieval=retrieval, **options), "aanswer")
