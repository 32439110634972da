"""Hybrid weights for a stretch of the quality bench: ``[collections.NAME.search]`` as a setting would give them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from store.settings import SearchSettings
from store.vectors import VectorStore

__all__ = ["weighted"]


@contextmanager
def weighted(store: VectorStore, name: str, weights: tuple[float, float] | None, **settings: object) -> Iterator[None]:
    """Collection ``name`` searched with ``vector_weight, keyword_weight = weights`` (None: as configured) and any
    other ``[collections.NAME.search]`` key, then as before. Only fusion settings change: nothing is re-analyzed."""
    collection = store.get_collection(name, create=True)
    before = collection.search_settings
    changes = dict(settings)
    if weights is not None:
        changes.update(vector_weight=weights[0], keyword_weight=weights[1])
    collection.search_settings = SearchSettings.model_validate({**before.model_dump(), **changes})
    try:
        yield
    finally:
        collection.search_settings = before
