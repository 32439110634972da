"""Generations: a collection's name as an alias for one of several physical collections, each embedded by one chain.

Vectors of two models do not mix, so changing a collection's model means a
second physical collection. ``vectorsync migrate NAME --chain NEW`` adds a
generation; while it builds, searches read the live one and updates go to both;
when its run is done the alias switches to it in one step, and the older
generation is kept, no longer written, until it is dropped.

A generation is named ``NAME__gN``. Generation 1 is the collection as first
made, so its physical collection keeps the plain name. A collection that was
never migrated has no rows: its one generation is the settings' own chain.
A generation records its chain with the models' settings, so every worker and
app embeds it alike, whatever chain its own settings name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from store.errors import ConfigError
from store.settings import ModelSettings, Settings
from store.settings.collection_names import parse_name

__all__ = [
    "Alias",
    "Generation",
    "Generations",
    "building_error",
    "generation_settings",
    "implicit",
    "live_error",
    "parse_name",
    "registered",
]


@dataclass(frozen=True, slots=True)
class Generation:
    """One physical collection behind a collection's name, and the chain that embeds it."""

    collection: str
    number: int
    chain: tuple[str, ...]
    #: The chain's ``[models.NAME]`` settings as JSON, by name; empty: the reader's own settings (never migrated).
    models: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    dimensions: int = 0
    #: The run that builds it (``vectorsync migrate``); None for generation 1.
    run_id: str | None = None
    created_at: datetime | None = None

    @property
    def name(self) -> str:
        """How commands name it: ``notes__g2``."""
        return f"{self.collection}__g{self.number}"

    @property
    def physical(self) -> str:
        """The store's collection, and the ledger's key, that holds it (generation 1 keeps the plain name)."""
        return self.collection if self.number == 1 else self.name

    @property
    def registered(self) -> bool:
        return bool(self.models)

    def signature(self) -> tuple[Any, ...]:
        """What decides its embeddings and vector size: generations alike share one store and one chain."""
        return (
            self.chain,
            self.dimensions,
            tuple(sorted((k, tuple(sorted(v.items()))) for k, v in self.models.items())),
        )


@dataclass(frozen=True, slots=True)
class Alias:
    """A migrated collection: its generations, and the one it reads."""

    collection: str
    live: int
    generations: tuple[Generation, ...]
    switched_at: datetime | None = None

    def generation(self, number: int) -> Generation:
        for generation in self.generations:
            if generation.number == number:
                return generation
        known = ", ".join(g.name for g in self.generations)
        raise ConfigError(
            f"collection {self.collection!r} has no generation {number} (it has {known}): "
            f"`vectorsync collections list` shows them"
        )

    @property
    def reads(self) -> Generation:
        return self.generation(self.live)

    @property
    def building(self) -> Generation | None:
        """The generation a migration builds (above the live one), if any."""
        newer = [g for g in self.generations if g.number > self.live]
        return newer[-1] if newer else None

    def status(self, generation: Generation) -> str:
        return "live" if generation.number == self.live else "building" if generation.number > self.live else "retired"


class Generations(Protocol):
    """Where the aliases live: the state database (``PostgresGenerations``), or memory (the reference)."""

    def alias(self, collection: str) -> Alias | None:
        """The collection's generations, or None when it was never migrated."""
        ...

    def aliases(self) -> list[Alias]: ...

    def begin(self, first: Generation, new: Generation) -> None:
        """Register ``new`` to build beside the live generation (``first`` too when the collection has no alias).
        A generation already building is a ConfigError naming it and the fix."""
        ...

    def set_run(self, collection: str, number: int, run_id: str) -> None: ...

    def switch(self, collection: str, number: int, *, expected: int) -> bool:
        """Make ``number`` live in one step, if ``expected`` is still live; whether it switched."""
        ...

    def forget(self, collection: str, number: int | None = None) -> None:
        """Forget one generation that is not live, or (None) the whole alias."""
        ...

    def close(self) -> None: ...


def implicit(settings: Settings, collection: str) -> Generation:
    """The one generation of a collection that was never migrated: the settings' chain and size."""
    return Generation(collection, 1, tuple(settings.embeddings.chain), {}, settings.vectors.dimensions)


def registered(
    settings: Settings, collection: str, chain: Sequence[str], number: int, run_id: str | None = None
) -> Generation:
    """A generation embedded by ``chain``, whose models the settings name (checked: they embed, one size)."""
    unknown = [name for name in chain if name not in settings.models]
    if unknown or not chain:
        known = ", ".join(n for n, m in sorted(settings.models.items()) if m.task == "embed") or "none"
        raise ConfigError(
            f"the chain {', '.join(chain) or '(empty)'} for {collection!r} names no configured "
            f"model {', '.join(unknown)}: add [models.NAME] to the settings (embedding models: {known})"
        )
    models = {name: settings.models[name] for name in chain}
    sizes = {model.dimensions for model in models.values()}
    if any(model.task != "embed" for model in models.values()) or len(sizes) != 1:
        raise ConfigError(
            f"the chain {', '.join(chain)} for {collection!r} must be embedding models of one size "
            f"(task = 'embed'; sizes {sorted(sizes)}): two sizes cannot share a collection"
        )
    return Generation(
        collection,
        number,
        tuple(chain),
        {name: model.model_dump(mode="json") for name, model in models.items()},
        sizes.pop(),
        run_id,
    )


def generation_settings(settings: Settings, generation: Generation) -> Settings:
    """``settings`` as the generation embeds: its chain, its models' settings and its vector size."""
    if not generation.registered:
        return settings
    models = dict(settings.models) | {name: ModelSettings(**value) for name, value in generation.models.items()}
    return settings.model_copy(
        update={
            "models": models,
            "embeddings": settings.embeddings.model_copy(update={"chain": list(generation.chain)}),
            "vectors": settings.vectors.model_copy(update={"dimensions": generation.dimensions}),
        }
    )


def building_error(alias: Alias) -> str:
    """Why a second migration of a collection is refused while one builds, and what to do."""
    building = alias.building
    assert building is not None
    return (
        f"collection {alias.collection!r} is already migrating to {building.name} "
        f"(chain {', '.join(building.chain)}): wait for it (`vectorsync status`), run it again with "
        f"`vectorsync migrate {alias.collection} --chain {','.join(building.chain)}`, or abandon it with "
        f"`vectorsync collections drop {building.name}`"
    )


def live_error(alias: Alias) -> str:
    """Why the live generation cannot be dropped on its own."""
    return (
        f"{alias.reads.name} is the generation {alias.collection!r} reads: it cannot be dropped alone. Migrate "
        f"to another chain first, or drop the whole collection (`vectorsync collections drop {alias.collection}`)"
    )
