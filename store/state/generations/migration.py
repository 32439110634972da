"""Changing a collection's model without downtime: a new generation is built, then switched to in one step.

``begin`` registers the generation and creates its collection (the caller
sends its reindex run); from then on every write of the collection goes to
the live generation and the new one. When the new generation's run is done
with no failure, the alias moves to it (``routing.switch_when_built``).
Searches read the live generation throughout, so none finds nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set

from store.embeddings.chain import space_model
from store.errors import ConfigError
from store.settings import Settings
from store.settings.collection_names import check_collection_name
from store.state.generations.base import (
    Generation,
    Generations,
    building_error,
    generation_settings,
    registered,
)
from store.vectors.backends import open_store

__all__ = ["begin", "plan"]


def plan(
    settings: Settings,
    registry: Generations,
    collection: str,
    chain: Sequence[str],
    *,
    embedded: Set[str] = frozenset(),
) -> tuple[Generation, Generation]:
    """The live generation of ``collection`` and the one ``chain`` would build (the one building already, to run
    again, when it has that chain). ``embedded``: the models the ledger says embedded the collection.
    Checks the collection and the chain; raises ConfigError naming the fix."""
    config = settings.collections.get(collection)
    if config is None:
        declared = ", ".join(sorted(settings.collections)) or "none"
        raise ConfigError(
            f"collection {collection!r} is not declared: migrate a collection of the settings "
            f"([collections.{collection}]); declared: {declared}"
        )
    if config.source.kind == "push":
        raise ConfigError(
            f"collection {collection!r} holds pushed documents, which only the app can send again: "
            "migrate needs a source to read every record from (sql or python). Declare a new "
            "collection under the new chain and push the documents to it"
        )
    if settings.vectors.store == "memory" or (settings.vectors.store == "qdrant" and not _qdrant_server(settings)):
        raise ConfigError(
            f"vectors.store = {settings.vectors.store!r} here lives in one process (memory, or "
            "Qdrant's local mode), so no worker could build a generation beside it: use pgvector "
            "or a Qdrant server"
        )
    alias = registry.alias(collection)
    live = alias.reads if alias is not None else _first(settings, collection, embedded)
    if tuple(chain) == live.chain:
        raise ConfigError(
            f"collection {collection!r} is embedded by the chain {', '.join(chain)} already "
            f"({live.name}): name another chain with --chain"
        )
    building = alias.building if alias is not None else None
    if building is not None:
        if building.chain != tuple(chain):
            raise ConfigError(building_error(alias))  # type: ignore[arg-type]
        return live, building
    number = max(g.number for g in alias.generations) + 1 if alias is not None else 2
    new = registered(settings, collection, chain, number)
    try:
        check_collection_name(new.physical)
    except ConfigError:
        raise ConfigError(
            f"collection {collection!r} cannot be migrated: its generation's name {new.physical!r} "
            f"is longer than 48 characters. Declare a collection with a shorter name"
        ) from None
    return live, new


def begin(
    settings: Settings,
    registry: Generations,
    collection: str,
    chain: Sequence[str],
    *,
    embedded_by: Callable[[str], Set[str]],
) -> Generation:
    """Register the generation ``chain`` builds for ``collection`` and create its collection, empty; from then
    on writes of ``collection`` go to it too. ``embedded_by``: the models the ledger says embedded a collection
    (``Ledger.models``), asked only of one never migrated. The caller sends its run (``Producer.migrate``)."""
    embedded = embedded_by(collection) if registry.alias(collection) is None else set()
    live, new = plan(settings, registry, collection, chain, embedded=embedded)
    try:
        store = open_store(generation_settings(settings, new))
    except ConfigError as exc:
        raise _cannot_hold(new, exc) from None
    with store:
        if new.created_at is None and store.has_collection(new.physical):
            raise ConfigError(
                f"a collection {new.physical!r} exists that is no generation of {collection!r} (left "
                f"from an earlier try?): drop it (vectorsync collections drop {new.physical}) and "
                "migrate again"
            )
        try:
            store.ensure_collection(new.physical)
        except ConfigError as exc:
            raise _cannot_hold(new, exc) from None
    if new.created_at is None:
        registry.begin(live, new)
    return new


def _qdrant_server(settings: Settings) -> bool:
    """Whether the Qdrant store is a server (as ``store.vectors.qdrant.client.is_server`` says, without
    loading qdrant-client)."""
    return (settings.vectors.url or "").startswith(("http://", "https://"))


def _cannot_hold(new: Generation, exc: ConfigError) -> ConfigError:
    return ConfigError(
        f"{new.name}, the new generation of {new.collection!r}, cannot hold the chain "
        f"{', '.join(new.chain)} ({new.dimensions} dimensions): {exc}"
    )


def _first(settings: Settings, collection: str, embedded: Set[str]) -> Generation:
    """Generation 1 of a collection never migrated: the chain of the models its records were embedded with
    (``embedded``, from the ledger), else the settings' chain. So migrate may run with settings whose chain
    is already the new one."""
    chain = list(settings.embeddings.chain)
    # A record embedded by a fallback model records "primary,fallback"; an int8 local model "name+int8"; a
    # model at a base_url "name@url"; an entry with weights its weights (store.embeddings.chain.vector_space).
    names = list(dict.fromkeys(space_model(space) for models in sorted(embedded) for space in models.split(",")))
    first = settings.models.get(chain[0]) if chain else None
    if names and (first is None or not {first.model, first.weights} & set(names)):
        by_model = {model.model: name for name, model in sorted(settings.models.items()) if model.task == "embed"}
        by_model |= {
            model.weights: name
            for name, model in sorted(settings.models.items())
            if model.task == "embed" and model.weights
        }
        chain = [by_model[found] for found in names if found in by_model][:1]
        if not chain:
            raise ConfigError(
                f"collection {collection!r} was embedded by {', '.join(sorted(embedded))}, which no "
                "[models.NAME] entry of the settings names: add it, so its generation can go on "
                "serving searches until the switch, then migrate"
            )
    if not chain:
        raise ConfigError(
            f"collection {collection!r} is embedded by the default fake model (embeddings.chain is "
            "empty); migrate needs the chain it is embedded by now: set embeddings.chain"
        )
    return registered(settings, collection, chain, 1)
