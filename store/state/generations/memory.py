"""The memory registry of generations: the reference implementation, for one process."""

from __future__ import annotations

import threading
from dataclasses import replace

from store.errors import ConfigError
from store.state.clock import now
from store.state.generations.base import Alias, Generation, building_error, live_error

__all__ = ["MemoryGenerations"]


class MemoryGenerations:
    """Aliases in a dict; see ``store.state.generations.base``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._aliases: dict[str, Alias] = {}

    def alias(self, collection: str) -> Alias | None:
        with self._lock:
            return self._aliases.get(collection)

    def aliases(self) -> list[Alias]:
        with self._lock:
            return [self._aliases[name] for name in sorted(self._aliases)]

    def begin(self, first: Generation, new: Generation) -> None:
        with self._lock:
            alias = self._aliases.get(new.collection) or Alias(
                new.collection, first.number, (replace(first, created_at=now()),)
            )
            if alias.building is not None:
                raise ConfigError(building_error(alias))
            if any(g.number == new.number for g in alias.generations):
                raise ConfigError(f"generation {new.name} exists already: drop it first")
            self._aliases[new.collection] = replace(
                alias, generations=(*alias.generations, replace(new, created_at=now()))
            )

    def set_run(self, collection: str, number: int, run_id: str) -> None:
        with self._lock:
            alias = self._aliases[collection]
            self._aliases[collection] = replace(
                alias,
                generations=tuple(replace(g, run_id=run_id) if g.number == number else g for g in alias.generations),
            )

    def switch(self, collection: str, number: int, *, expected: int) -> bool:
        with self._lock:
            alias = self._aliases.get(collection)
            if alias is None or alias.live != expected:
                return False
            alias.generation(number)
            self._aliases[collection] = replace(alias, live=number, switched_at=now())
            return True

    def forget(self, collection: str, number: int | None = None) -> None:
        with self._lock:
            alias = self._aliases.get(collection)
            if alias is None:
                return
            if number is None:
                del self._aliases[collection]
                return
            if number == alias.live:
                raise ConfigError(live_error(alias))
            self._aliases[collection] = replace(
                alias, generations=tuple(g for g in alias.generations if g.number != number)
            )

    def close(self) -> None:
        pass
