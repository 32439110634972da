"""The stores and embeddings behind a collection's generations: what a read or a write of a name opens.

Generations embedded alike (one chain, one size) share one store and one
``Embeddings``; the settings' own are used where they match, so a collection
that was never migrated costs nothing more than before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from store.settings import Settings
from store.state.generations.base import Generation, Generations, generation_settings, reading, writing
from store.vectors.backends import open_store
from store.vectors.base import Collection, VectorStore

if TYPE_CHECKING:
    from store.embeddings import Embeddings

__all__ = ["GenerationStores"]


class GenerationStores:
    """Opens the collection behind each generation with the store and embeddings of its chain and size.

    ``store`` and ``embeddings`` are the settings' own; others are built on first use and kept.
    ``registry`` None: no collection was migrated (an in-process run), every name is its own collection.
    """

    def __init__(self, settings: Settings, *, store: VectorStore, embeddings: Embeddings | None = None,
                 registry: Generations | None = None,
                 on_embeddings: Callable[[Embeddings], Any] | None = None) -> None:
        self.settings, self.store, self.embeddings, self.registry = settings, store, embeddings, registry
        self._on_embeddings = on_embeddings
        self._own = _own_signature(settings)
        self._built: dict[tuple[Any, ...], tuple[VectorStore, Embeddings]] = {}
        self._lock = threading.Lock()

    def reading(self, name: str) -> Generation:
        """The generation a read of ``name`` goes to (``store.state.generations.reading``)."""
        return reading(self.settings, self.registry, name)

    def writing(self, name: str) -> list[Generation]:
        """The generations a write of ``name`` goes to (``store.state.generations.writing``)."""
        return writing(self.settings, self.registry, name)

    def parts(self, generation: Generation) -> tuple[VectorStore, Embeddings | None]:
        """The store and embeddings of the generation's chain and size."""
        key = generation.signature()
        if not generation.registered or key == self._own:
            return self.store, self.embeddings
        with self._lock:
            if key not in self._built:
                self._built[key] = self._build(generation)
            return self._built[key]

    def _build(self, generation: Generation) -> tuple[VectorStore, Embeddings]:
        from store.embeddings import Embeddings

        settings = generation_settings(self.settings, generation)
        embeddings = Embeddings.from_settings(settings)
        if self._on_embeddings is not None:
            self._on_embeddings(embeddings)
        try:
            return open_store(settings, embedder=embeddings), embeddings
        except BaseException:
            embeddings.close()
            raise

    def collection(self, generation: Generation) -> Collection:
        """The generation's physical collection (created if missing), with its collection's required filter and
        declared indexed fields."""
        store, _ = self.parts(generation)
        physical = generation.physical
        declared = self.settings.collections.get(generation.collection)
        if declared is not None and physical != generation.collection:
            if declared.required_filter and physical not in store.required_filters:
                store.require_filter(physical, declared.required_filter)
            if declared.index.fields:
                store.indexed.setdefault(physical, declared.index.fields)
        return store.collection(physical)

    def close(self) -> None:
        with self._lock:
            built, self._built = list(self._built.values()), {}
        for store, embeddings in built:
            store.close()
            embeddings.close()


def _own_signature(settings: Settings) -> tuple[Any, ...]:
    chain = tuple(settings.embeddings.chain)
    models = {name: settings.models[name].model_dump(mode="json") for name in chain if name in settings.models}
    return Generation("", 1, chain, models, settings.vectors.dimensions).signature()
