"""Collection lifecycle: create, open, empty and drop collections, their vectors and the ledger's state together.

The ledger remembers which content each record was indexed from, so a reindex
skips what it holds. A collection emptied or dropped in the store alone would
keep that memory, and the next reindex would skip every record and leave it
empty: ``reset`` and ``drop`` here clear the collection's ledger entries and
failures too (runs stay, as history).

    from store.lifecycle import Collections
    with Collections.from_settings(load_settings()) as collections:
        notes = collections.get_or_create("notes")
        collections.reset("notes")          # empty, schema and indexes kept, ledger forgotten
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from store.errors import ConfigError
from store.settings import Settings
from store.state.generations import Alias, Generation
from store.state.generations.base import generation_settings, parse_name
from store.state.generations.routing import dropping, read_physical
from store.state.ledger import Forgotten, Ledger, ledger_from_settings
from store.vectors.backends import open_store
from store.vectors.base import Collection, VectorStore, missing
from store.vectors.rules import Rules

__all__ = ["Collections", "Emptied", "RulesChanged"]

log = logging.getLogger("vectorsync.collections")


@dataclass(frozen=True, slots=True)
class Emptied:
    """What ``reset`` or ``drop`` removed: the collection's chunks (None: not counted, the collection was made
    with other vector settings), and its ledger entries and failures."""

    chunks: int | None
    forgotten: Forgotten


@dataclass(frozen=True, slots=True)
class RulesChanged:
    """One physical collection's rules before and after ``Collections.set_rules``, and the chunks analyzed."""

    physical: str
    before: Rules
    after: Rules
    analyzed: int


class Collections:
    """The lifecycle of collections in one store with one ledger; see the module docstring.

    Indexing a collection while it is reset or dropped races with it: stop its reindex first, or run
    ``vectorsync reindex`` afterwards.
    """

    def __init__(
        self, store: VectorStore, ledger: Ledger, *, declared: Iterable[str] = (), settings: Settings | None = None
    ) -> None:
        self.store, self.ledger = store, ledger
        #: The collections the settings declare (``create_declared`` makes them).
        self.declared = tuple(declared)
        #: The settings, to open generations of other sizes for counting their chunks (None: not counted).
        self.settings = settings

    @classmethod
    def from_settings(cls, settings: Settings) -> Collections:
        """The store ``[vectors]`` names (no embeddings: nothing here searches) and the state database's ledger.

        A memory store keeps nothing past its process, so with no state database its ledger is in memory too.
        Raises ConfigError, StoreUnavailable.
        """
        store = open_store(settings)
        try:
            ledger = ledger_from_settings(settings, memory_fallback=True)
        except BaseException:
            store.close()
            raise
        return cls(store, ledger, declared=sorted(settings.collections), settings=settings)

    def names(self) -> list[str]:
        """The collections the store holds, sorted."""
        return self.store.list_collections()

    def exists(self, name: str) -> bool:
        return self.store.has_collection(name)

    def create(self, name: str) -> Collection:
        """Create ``name``; one that exists is a ConfigError naming the fix (nothing changes).

        The check and the creation are two steps: two creators racing both succeed, with one collection.
        """
        if self.exists(name):
            raise ConfigError(
                f"collection {name!r} already exists: open it (Collections.get, or get_or_create), or drop "
                f"it first (vectorsync collections drop {name})"
            )
        return self.store.ensure_collection(name)

    def get(self, name: str) -> Collection:
        """The existing collection ``name``; a missing one is a ConfigError naming the fix (nothing is created)."""
        return self.store.get_collection(name)

    def get_or_create(self, name: str) -> Collection:
        """``name``, created empty if missing."""
        return self.store.ensure_collection(name)

    def chunks(self, name: str) -> int | None:
        """How many chunks ``name`` holds (a migrated collection: its live generation); None when it was made
        with another size or metric than the settings say (it cannot be opened, only dropped). A missing
        collection is a ConfigError naming the fix."""
        return self._count(self.physical(name))

    def _count(self, name: str) -> int | None:
        if not self.exists(name):
            raise ConfigError(missing(name, self.names()))
        try:
            return self.store.get_collection(name).total()
        except ConfigError:
            return None

    def reset(self, name: str) -> Emptied:
        """Empty ``name`` and forget its ledger entries and failures; its schema and indexes stay.

        So the next reindex indexes every record again. A migrated collection empties its live generation
        (``NAME__gN``: that one). A missing collection is a ConfigError.
        """
        name = self.physical(name)
        chunks = self._count(name)
        forgotten = self.ledger.forget_collection(name)  # first: a failure after it leaves records to index again
        self.store.reset_collection(name)
        return Emptied(chunks, self._forget_again(name, forgotten))

    def recount(self, name: str) -> int:
        """Count ``name``'s keyword statistics anew from its rows (its live generation's, when migrated), to
        repair drift; returns how many terms were counted otherwise before. A missing collection: ConfigError."""
        name = self.physical(name)
        if not self.exists(name):
            raise ConfigError(missing(name, self.names()))
        return self.store.get_collection(name).recount_keywords()

    def set_rules(self, name: str, **changes: object) -> list[RulesChanged]:
        """Change the rules collection ``name`` holds (``required_filter``, ``keywords``, ``language``) in every
        generation of it, so a migration's tenancy and keyword index stay its collection's: what each held before
        and holds now, and the chunks whose text was analyzed anew (nothing is re-embedded). A missing
        collection, or a generation's name: ConfigError."""
        if parse_name(name)[1] is not None:
            raise ConfigError(
                f"{name!r} is one generation: a collection's rules hold for all of its generations, so set them "
                f"on {parse_name(name)[0]!r}"
            )
        alias = self.ledger.generations.alias(name) if self.ledger.generations is not None else None
        generations = list(alias.generations) if alias is not None else [Generation(name, 1, ())]
        held = [g for g in generations if self.exists(g.physical)]
        if not held:
            raise ConfigError(missing(name, self.names()))
        changed = []
        for generation in held:
            with self._store_of(generation) as store:
                before, after, analyzed = store.set_rules(generation.physical, **changes)
            changed.append(RulesChanged(generation.physical, before, after, analyzed))
        return changed

    @contextmanager
    def _store_of(self, generation: Generation) -> Iterator[VectorStore]:
        """The store a generation is opened with: its own chain's size, or this one for the collection as made."""
        if self.settings is None or not generation.registered:
            yield self.store
            return
        with open_store(generation_settings(self.settings, generation)) as store:
            yield store

    def physical(self, name: str) -> str:
        """The store's collection a name reads: a migrated collection's live generation, or ``NAME__gN``'s."""
        return read_physical(self.ledger.generations, name)

    def drop(self, name: str) -> Emptied:
        """Delete ``name`` with everything in it, and forget its ledger entries and failures.

        A migrated collection goes with every generation; ``NAME__gN`` drops one generation that is not live
        (an old one, or a migration abandoned). A missing collection is a ConfigError naming the existing ones.
        A declared collection comes back, empty, when a worker starts or ``vectorsync init`` runs, and filled
        by its next reindex: to keep it gone, remove it from the settings.
        """
        plan = dropping(self.ledger.generations, name)
        if plan.alias is None:
            return self._drop_physical(name)
        self.ledger.generations.forget(plan.alias.collection, plan.number)  # first: no switch to it, no write
        dropped = [self._drop_physical(physical, missing_ok=True) for physical in plan.physical]
        counts = [d.chunks for d in dropped]
        return Emptied(
            None if None in counts else sum(c or 0 for c in counts),
            Forgotten(sum(d.forgotten.entries for d in dropped), sum(d.forgotten.failures for d in dropped)),
        )

    def _drop_physical(self, name: str, *, missing_ok: bool = False) -> Emptied:
        if missing_ok and not self.exists(name):
            return Emptied(0, self.ledger.forget_collection(name))
        chunks = self._count(name)  # one of other vector settings is counted as None, and dropped all the same
        forgotten = self.ledger.forget_collection(name)
        self.store.drop_collection(name)
        return Emptied(chunks, self._forget_again(name, forgotten))

    def aliases(self) -> list[Alias]:
        """The migrated collections, with their generations."""
        return self.ledger.generations.aliases()

    def generation_chunks(self, generation: Generation) -> int | None:
        """How many chunks a generation holds (None: its collection is missing, or not countable here)."""
        if self.settings is None or not self.exists(generation.physical):
            return None
        with open_store(generation_settings(self.settings, generation)) as store:  # no embedder:
            return store.get_collection(generation.physical).total()  # counting needs no model key

    def _forget_again(self, name: str, first: Forgotten) -> Forgotten:
        """A record indexed between the first forget and the store's change would be remembered without its
        chunks: forget once more, which narrows that window to one record's write."""
        again = self.ledger.forget_collection(name)
        return Forgotten(first.entries + again.entries, first.failures + again.failures)

    def create_declared(self) -> list[str]:
        """Create the declared collections that are missing (a worker's start, ``vectorsync init``); return them.
        A migrated collection's generations are left as they are."""
        migrated = {alias.collection for alias in self.aliases()}  # made by migrate, in their own sizes
        declared = [name for name in self.declared if name not in migrated]
        created = [name for name in declared if not self.exists(name)]
        for name in declared:
            self.store.ensure_collection(name)  # an existing one is checked against the settings (size, metric)
        if created:
            log.info("created the declared collections %s", ", ".join(created))
        return created

    def close(self) -> None:
        self.store.close()
        self.ledger.close()

    def __enter__(self) -> Collections:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
