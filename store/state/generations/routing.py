"""Where a collection's name leads: the generations a read and a write of it go to, and the switch between them.

This module is the one place that decides it. The worker asks it where a
batch is written, the query path where a search reads, the lifecycle what a
drop removes, and the worker that ends a migration's run whether to switch.

``Router`` opens each generation's collection with the store and embeddings
of its chain and size. Generations embedded alike (one chain, one size) share
one store and one ``Embeddings``; the settings' own are used where they match,
so a collection that was never migrated costs nothing more than a plain one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from store.contract import RunStatus
from store.errors import ConfigError
from store.settings import CollectionSettings, Settings
from store.state.generations.base import (
    Alias,
    Generation,
    Generations,
    generation_settings,
    implicit,
    live_error,
    parse_name,
)
from store.vectors.backends import open_store
from store.vectors.base import Collection, VectorStore
from store.vectors.rules import Rules

if TYPE_CHECKING:
    from store.embeddings import Embeddings

__all__ = [
    "Dropping",
    "Router",
    "Run",
    "dropping",
    "migrated",
    "open_declared",
    "read_physical",
    "reading",
    "switch_now",
    "switch_when_built",
    "writing",
]

log = logging.getLogger("vectorsync.migrate")


def migrated(registry: Generations | None, name: str) -> tuple[Alias, int | None] | None:
    """The alias ``name`` belongs to, and the generation it names (None: the collection itself); None for a
    collection never migrated, or a ``NAME__gN`` that is no generation of it (a plain collection's name)."""
    collection, number = parse_name(name)
    alias = registry.alias(collection) if registry is not None else None
    if alias is None or (number is not None and number not in {g.number for g in alias.generations}):
        return None
    return alias, number


def reading(settings: Settings, registry: Generations | None, name: str) -> Generation:
    """The generation a read of ``name`` goes to: the live one, or the generation ``NAME__gN`` names."""
    collection, number = parse_name(name)
    alias = registry.alias(collection) if registry is not None else None
    if alias is None:
        return implicit(settings, name)
    return alias.reads if number is None else alias.generation(number)


def writing(settings: Settings, registry: Generations | None, name: str) -> list[Generation]:
    """The generations a write of ``name`` goes to: the live one and the one building, or the one named."""
    collection, number = parse_name(name)
    alias = registry.alias(collection) if registry is not None else None
    if alias is None:
        return [implicit(settings, name)]
    if number is not None:
        return [alias.generation(number)]
    building = alias.building
    return [alias.reads] + ([building] if building is not None else [])


def read_physical(registry: Generations | None, name: str) -> str:
    """The store's collection a name reads: a migrated collection's live generation, or ``NAME__gN``'s; a
    collection never migrated is its own."""
    found = migrated(registry, name)
    if found is None:
        return name
    alias, number = found
    return (alias.reads if number is None else alias.generation(number)).physical


@dataclass(frozen=True, slots=True)
class Dropping:
    """What a drop of a name removes: the physical collections, and the generation (or the whole alias, number
    None) the registry forgets first, so nothing switches to it or writes it from then on."""

    physical: tuple[str, ...]
    alias: Alias | None = None
    number: int | None = None


def dropping(registry: Generations | None, name: str) -> Dropping:
    """What ``vectorsync collections drop NAME`` removes. A migrated collection goes with every generation;
    ``NAME__gN`` is one generation that is not live. The live one alone is a ConfigError naming the fix."""
    found = migrated(registry, name)
    if found is None:
        return Dropping((name,))
    alias, number = found
    if number is None:
        return Dropping(tuple(g.physical for g in alias.generations), alias)
    if number == alias.live:
        raise ConfigError(live_error(alias))
    return Dropping((alias.generation(number).physical,), alias, number)


class Run(Protocol):
    """What a switch reads of a generation's run (``store.state.ledger.RunProgress`` is one: the ledger holds
    this registry, so this module never imports the ledger)."""

    @property
    def run_id(self) -> str: ...
    @property
    def collection(self) -> str: ...
    @property
    def status(self) -> RunStatus: ...
    @property
    def total(self) -> int | None: ...
    @property
    def failed(self) -> int: ...


def switch_when_built(registry: Generations, progress: Run) -> Generation | None:
    """Switch the alias to the generation whose run ``progress`` is, if that run is done without failures;
    the generation switched to, else None. A run with failures, or with no record at all (a source that
    read nothing would empty every search), leaves it building, and says so."""
    collection, number = parse_name(progress.collection)
    if progress.status != RunStatus.DONE or number is None:
        return None
    alias = registry.alias(collection)
    building = alias.building if alias is not None else None
    if alias is None or building is None or building.number != number or building.run_id != progress.run_id:
        return None
    if progress.failed or not progress.total:
        why = f"{progress.failed} records failed" if progress.failed else "its source gave no record"
        log.warning(
            "%s is built but %s, so %s still reads %s: fix that, then run `vectorsync migrate %s --chain "
            "%s` again (records in already are skipped), or switch anyway (vectorsync migrate %s --switch)",
            building.name,
            why,
            collection,
            alias.reads.name,
            collection,
            ",".join(building.chain),
            collection,
        )
        return None
    return _switch(registry, alias, building)


def switch_now(registry: Generations, collection: str, run: Run | None) -> Generation:
    """Switch to the building generation of ``collection`` whose run is done, failures or not (``--switch``)."""
    alias = registry.alias(collection)
    building = alias.building if alias is not None else None
    if alias is None or building is None:
        raise ConfigError(
            f"collection {collection!r} has no generation building: "
            f"start one with `vectorsync migrate {collection} --chain NEW`"
        )
    if run is None or run.status != RunStatus.DONE:
        state = "has no run" if run is None else f"run {run.run_id} is {run.status}"
        raise ConfigError(
            f"{building.name} is not built ({state}): run `vectorsync migrate {collection} --chain "
            f"{','.join(building.chain)}` to build it, then switch"
        )
    switched = _switch(registry, alias, building)
    if switched is None:
        raise ConfigError(f"{collection!r} switched meanwhile: `vectorsync collections list` shows what it reads")
    return switched


def _switch(registry: Generations, alias: Alias, building: Generation) -> Generation | None:
    if not registry.switch(alias.collection, building.number, expected=alias.live):
        return None
    log.info(
        "%s now reads %s (chain %s); %s is kept until dropped (vectorsync collections drop %s)",
        alias.collection,
        building.name,
        ", ".join(building.chain),
        alias.reads.name,
        alias.reads.name,
    )
    return building


def open_declared(store: VectorStore, name: str, declared: Mapping[str, CollectionSettings]) -> Collection:
    """``name`` in ``store`` to read: a ``declared`` one (created empty if need be), else one that exists; a
    name that is neither is a ConfigError (reading never creates a table for a typo). A declared
    collection's own rules hold whatever these settings say (``store.vectors.rules``)."""
    config = declared.get(name)
    if config is not None and name not in store.declared:
        store.declare(name, config)
    return store.get_collection(name, create=name in declared)


class Router:
    """Opens the collection behind each generation with the store and embeddings of its chain and size.

    ``store`` and ``embeddings`` are the settings' own (``embeddings`` None: the caller embeds with its own);
    those of other chains and sizes are built on first use and kept.
    ``registry`` None: no collection was migrated (an in-process run), every name is its own collection.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        store: VectorStore,
        embeddings: Embeddings | None = None,
        registry: Generations | None = None,
        on_embeddings: Callable[[Embeddings], Any] | None = None,
    ) -> None:
        self.settings, self.store, self.embeddings, self.registry = settings, store, embeddings, registry
        self._on_embeddings = on_embeddings
        self._own = _own_signature(settings)
        self._built: dict[tuple[Any, ...], tuple[VectorStore, Embeddings]] = {}
        self._lock = threading.Lock()

    def reading(self, name: str) -> Generation:
        """The generation a read of ``name`` goes to."""
        return reading(self.settings, self.registry, name)

    def writing(self, name: str) -> list[Generation]:
        """The generations a write of ``name`` goes to."""
        return writing(self.settings, self.registry, name)

    def read(self, name: str) -> Collection:
        """The collection a search of ``name`` reads: its live generation's (``NAME__gN``: that one's); a
        collection never migrated opens as ``open_declared`` does (a declared one is created empty)."""
        generation = self.reading(name)
        if generation.registered:
            return self.collection(generation)
        return open_declared(self.store, name, self.settings.collections)

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
        store, physical = self._prepared(generation)
        return store.get_collection(physical, create=True)

    def ensure(self, generation: Generation) -> Collection:
        """``collection``, created again if another process dropped it since this one opened it: what a run
        that starts on it asks, so ``vectorsync collections drop`` then ``reindex`` fills it anew."""
        store, physical = self._prepared(generation)
        return store.ensure_collection(physical)

    def _prepared(self, generation: Generation) -> tuple[VectorStore, str]:
        store, _ = self.parts(generation)
        physical = generation.physical
        declared = self.settings.collections.get(generation.collection)
        if physical != generation.collection and physical not in store.declared:
            store.declare(physical, declared or CollectionSettings(), held=self._inherited(generation))
        return store, physical

    def _inherited(self, generation: Generation) -> Rules | None:
        """The rules of the generation ``generation``'s collection reads now: a new generation is made with them,
        so a migration keeps the collection's tenancy and keyword index whatever the migrating process declares."""
        alias = self.registry.alias(generation.collection) if self.registry is not None else None
        reads = alias.reads if alias is not None else implicit(self.settings, generation.collection)
        if reads.physical == generation.physical:
            return None
        store, _ = self.parts(reads)
        return store.rules_of(reads.physical) if store.has_collection(reads.physical) else None

    def close(self) -> None:
        """Close the stores and embeddings built here for other chains (the settings' own are the caller's)."""
        with self._lock:
            built, self._built = list(self._built.values()), {}
        for store, embeddings in built:
            store.close()
            embeddings.close()


def _own_signature(settings: Settings) -> tuple[Any, ...]:
    chain = tuple(settings.embeddings.chain)
    models = {name: settings.models[name].model_dump(mode="json") for name in chain if name in settings.models}
    return Generation("", 1, chain, models, settings.vectors.dimensions).signature()
