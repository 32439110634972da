"""Search, rerank and grounded answers from app code and the CLI; everything is built from the settings.

    from store.query import search, rerank, answer
    search("activity_notes", "onboarding delays", filter={"kind": "call"}, limit=5)
    rerank("onboarding delays", matches, top=3)
    answer("activity_notes", "Why is Dana's onboarding late?", filter={"owner_id": 7})

Each has an async twin (``asearch``, ``arerank``, ``aanswer``) that runs it in a thread. Mixing them up is a
TypeError naming the right call (``store.retrieval.twins``): ``await search(...)`` names ``asearch``, and the result
of ``asearch(...)`` used without ``await`` names ``await asearch(...)``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from store.errors import ConfigError
from store.retrieval import Allow, GroundedAnswer, Retrieval
from store.retrieval.twins import Matches, Pending
from store.settings import CollectionSettings, Settings, load_settings
from store.state.generations import Generations
from store.state.generations.routing import GenerationStores
from store.vectors.backends import open_store
from store.vectors.base import DEFAULT_LIMIT, Collection, VectorStore
from store.vectors.filters import Filter
from store.vectors.records import VectorMatch

__all__ = [
    "aanswer", "answer", "arerank", "asearch", "default_retrieval", "default_store", "open_collection", "rerank",
    "search", "store_from_settings", "use_defaults",
]

_default: VectorStore | None = None
_serving: GenerationStores | None = None
#: Whether ``use_defaults`` gave the store (an in-process run: no aliases to read).
_injected = False
_retrieval: Retrieval | None = None
#: The collections a read may create empty; None: those ``load_settings()`` declares, read at each call.
_declared: dict[str, CollectionSettings] | None = None
_lock = threading.Lock()


def store_from_settings(settings: Settings) -> VectorStore:
    """The configured store, with the embeddings chain for text queries."""
    return open_store(settings, embedder=_embedder(settings))


def _embedder(settings: Settings) -> Any:
    from store.embeddings import Embeddings

    return Embeddings.from_settings(settings)


def default_store() -> VectorStore:
    """One store per process, built from ``load_settings()`` on first use."""
    global _default
    with _lock:
        if _default is None:
            _default = store_from_settings(load_settings())
        return _default


def default_generations() -> GenerationStores:
    """What reads of a collection open: its live generation (``store.state.generations``), over ``default_store()``.

    The aliases are read from the state database at each search, so a switch is seen at once; with no state
    database (or in an in-process run, ``use_defaults``) every name is its own collection.
    """
    global _serving
    store = default_store()
    with _lock:
        if _serving is None or _serving.store is not store:  # built over another default store: not this one's
            if _serving is not None:
                _serving.close()
                if _serving.registry is not None:
                    _serving.registry.close()
            settings = load_settings()
            _serving = GenerationStores(settings, store=store, embeddings=store.embedder,  # type: ignore[arg-type]
                                        registry=_registry(settings))
        return _serving


def _registry(settings: Settings) -> Generations | None:
    if settings.state_url is None:
        return None
    from store.state.generations.postgres import PostgresGenerations

    return PostgresGenerations(settings.state_url)


def default_retrieval() -> Retrieval:
    """One Retrieval per process over ``default_store()``, from ``load_settings()`` on first use; it reads
    each collection's live generation."""
    global _retrieval
    store = default_store()
    with _lock:
        if _retrieval is None:
            _retrieval = Retrieval.from_settings(load_settings(), store=store)
            _retrieval.opener = lambda name, _declared: _open_live(name)  # as search reads
        return _retrieval


def use_defaults(store: VectorStore | None, retrieval: Retrieval | None = None, *,
                 declared: Mapping[str, CollectionSettings] | None = None) -> Callable[[], None]:
    """Make ``store``, ``retrieval`` and the ``declared`` collections what these functions use without
    ``store=`` or ``retrieval=`` (None: built from ``load_settings()`` again); returns the function that puts
    the previous ones back. For in-process test harnesses (``producer.testing``)."""
    global _default, _retrieval, _declared, _serving, _injected
    with _lock:
        previous = (_default, _retrieval, _declared, _serving, _injected)
        _default, _retrieval = store, retrieval
        _declared = dict(declared) if declared is not None else None
        _serving, _injected = None, store is not None

    def restore() -> None:
        global _default, _retrieval, _declared, _serving, _injected
        with _lock:
            _default, _retrieval, _declared, _serving, _injected = previous

    return restore


def _as_filter(filter: Filter | Mapping[str, Any] | None) -> Filter | None:
    return Filter.from_dict(filter) if isinstance(filter, Mapping) else filter


def search(
    collection: str,
    query: str | Sequence[float],
    *,
    filter: Filter | Mapping[str, Any] | None = None,
    limit: int = DEFAULT_LIMIT,
    min_score: float | None = None,
    store: VectorStore | None = None,
) -> Matches:
    """The ``limit`` best matches for a text or vector ``query`` in ``collection``, as a list.

    ``filter`` is a Filter or its JSON form. Raises ConfigError, StoreUnavailable, EmbeddingError.
    """
    target = open_collection(store, collection) if store is not None else _open_live(collection)
    return Matches(target.search(query, filter=_as_filter(filter), limit=limit, min_score=min_score), called="search")


def open_collection(store: VectorStore, name: str, *,
                    configured: Mapping[str, CollectionSettings] | None = None) -> Collection:
    """A collection to read: a configured one (created empty if need be), else one that exists.

    A name that is neither is a ConfigError: reading never creates a table for a typo. A configured
    ``required_filter`` holds even on a store that was not built from the settings. ``configured``: the
    collections of the settings the store was built from (None: ``load_settings()``'s, read now).
    """
    configured = dict(configured) if configured is not None else _configured()
    declared = configured.get(name)
    if declared is not None and declared.required_filter and name not in store.required_filters:
        store.require_filter(name, declared.required_filter)
    return store.open(name, declared=set(configured))


def _open_live(name: str) -> Collection:
    """The collection a search of ``name`` reads: its live generation's (``use_defaults``: the store given)."""
    with _lock:
        given = _default if _injected else None
    if given is not None:
        return open_collection(given, name)
    serving = default_generations()
    generation = serving.reading(name)
    if generation.registered:
        return serving.collection(generation)
    return open_collection(serving.store, name, configured=serving.settings.collections)


def _configured() -> dict[str, CollectionSettings]:
    if _declared is not None:
        return dict(_declared)
    try:
        return dict(load_settings().collections)
    except ConfigError:
        return {}


def asearch(
    collection: str,
    query: str | Sequence[float],
    *,
    filter: Filter | Mapping[str, Any] | None = None,
    limit: int = DEFAULT_LIMIT,
    min_score: float | None = None,
    store: VectorStore | None = None,
) -> Pending[Matches]:
    """``search`` without blocking the event loop (it runs in a worker thread): ``await asearch(...)``."""
    return Pending(asyncio.to_thread(
        search, collection, query, filter=filter, limit=limit, min_score=min_score, store=store
    ), "asearch")


def rerank(query: str, matches: Sequence[VectorMatch], *, top: int | None = None, user: str | None = None,
           retrieval: Retrieval | None = None) -> Matches:
    """The ``top`` matches that best answer ``query``, best first, ``score`` the reranker's (0 to 1).

    With no rerank model configured the search order is kept and nothing is called. ``user`` names
    the caller in the cost metrics. Raises ConfigError, ProviderError.
    """
    return Matches((retrieval or default_retrieval()).rerank(query, matches, top=top, user=user), called="rerank")


def arerank(query: str, matches: Sequence[VectorMatch], *, top: int | None = None, user: str | None = None,
            retrieval: Retrieval | None = None) -> Pending[Matches]:
    """``rerank`` without blocking the event loop: ``await arerank(...)``."""
    return Pending(asyncio.to_thread(rerank, query, matches, top=top, user=user, retrieval=retrieval), "arerank")


def answer(collection: str, question: str, *, filter: Filter | Mapping[str, Any] | None = None,
           candidates: int | None = None, top: int | None = None, user: str | None = None,
           allow: Allow | None = None, retrieval: Retrieval | None = None) -> GroundedAnswer:
    """Answer ``question`` from the passages of ``collection`` that ``filter`` allows, citing them.

    Retrieves ``candidates`` matches (``retrieval.candidates``), keeps those ``allow(matches)`` returns
    (the app's access check, before any model sees them), reranks them to ``top`` (``retrieval.top``) and
    asks the chat chain; invented citations are dropped and ``answered`` is False, with a reason, when the
    passages do not hold the answer. ``user`` names the caller in the cost metrics.
    Raises ConfigError, StoreUnavailable, ProviderError.
    """
    return (retrieval or default_retrieval()).answer(collection, question, filter=filter, candidates=candidates,
                                                     top=top, user=user, allow=allow)


def aanswer(collection: str, question: str, *, filter: Filter | Mapping[str, Any] | None = None,
            candidates: int | None = None, top: int | None = None, user: str | None = None,
            allow: Allow | None = None, retrieval: Retrieval | None = None) -> Pending[GroundedAnswer]:
    """``answer`` without blocking the event loop: ``await aanswer(...)`` (``allow`` runs in the worker thread)."""
    return Pending(asyncio.to_thread(answer, collection, question, filter=filter, candidates=candidates, top=top,
                                     user=user, allow=allow, retrieval=retrieval), "aanswer")
