"""A Python function as a source: ``loader = "package.module:function"``.

The function is called as ``function(ids)`` with a list of record ids and
returns the records among them that exist, or as ``function(None)`` for all
records; each record is a mapping with ``id``, ``text`` and optional
``metadata``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from store.errors import ConfigError
from worker.sources.base import SourceRecord

__all__ = ["PythonSource", "load_callable"]

Loader = Callable[[list[str] | None], Iterable[Mapping[str, Any]]]


def load_callable(spec: str) -> Loader:
    """Import ``module:function``; a bad spec is a ConfigError naming it."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"source.loader {spec!r} is not 'module:function' (e.g. 'myapp.search:load_notes')")
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"source.loader {spec!r} cannot be loaded: {exc}") from None
    if not callable(found):
        raise ConfigError(f"source.loader {spec!r} is not a function")
    return found  # type: ignore[no-any-return]


def _record(item: Mapping[str, Any], spec: str) -> SourceRecord:
    if not isinstance(item, Mapping) or "id" not in item:
        raise ConfigError(f"source.loader {spec!r} returned {item!r}; records are mappings with 'id' and 'text'")
    return SourceRecord(id=str(item["id"]), text=str(item.get("text") or ""), metadata=dict(item.get("metadata") or {}))


class PythonSource:
    """Records from app code."""

    def __init__(self, *, loader: str) -> None:
        self.spec = loader
        self.loader = load_callable(loader)

    def fetch(self, ids: Sequence[str]) -> dict[str, SourceRecord]:
        wanted = set(ids)
        records = (_record(item, self.spec) for item in self.loader(list(ids)))
        return {r.id: r for r in records if r.id in wanted}

    def page_ids(self, *, after: str | None, limit: int) -> list[str]:
        ids = sorted(_record(item, self.spec).id for item in self.loader(None))
        return [i for i in ids if after is None or i > after][:limit]

    def close(self) -> None:
        """Nothing to release."""
