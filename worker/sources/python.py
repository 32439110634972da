"""A Python function as a source: ``loader = "package.module:function"``.

The function is called as ``function(ids)`` with a list of record ids and
returns the records among them that exist, or as ``function(None)`` for all
records; each record is a mapping with ``id``, ``text`` and optional
``metadata``.
"""

from __future__ import annotations

import bisect
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
    return found


def _record(item: Mapping[str, Any], spec: str) -> SourceRecord:
    if not isinstance(item, Mapping) or "id" not in item:
        raise ConfigError(f"source.loader {spec!r} returned {item!r}; records are mappings with 'id' and 'text'")
    return SourceRecord(id=str(item["id"]), text=str(item.get("text") or ""), metadata=dict(item.get("metadata") or {}))


class PythonSource:
    """Records from app code."""

    def __init__(self, *, loader: str) -> None:
        self.spec = loader
        self.loader = load_callable(loader)
        self._ids: list[str] | None = None

    def fetch(self, ids: Sequence[str]) -> dict[str, SourceRecord]:
        wanted = set(ids)
        records = (_record(item, self.spec) for item in self.loader(list(ids)))
        return {r.id: r for r in records if r.id in wanted}

    def page_ids(self, *, after: str | None, limit: int) -> list[str]:
        # A sweep starts at after=None: load every id once then, and page through that list.
        if after is None or self._ids is None:
            self._ids = sorted(_record(item, self.spec).id for item in self.loader(None))
        start = 0 if after is None else bisect.bisect_right(self._ids, after)
        return self._ids[start : start + limit]

    def page_stamps(self, *, after: str | None, limit: int) -> list[tuple[str, str]]:
        """Loaders keep no change marker: every id comes with an empty stamp (always re-read)."""
        return [(record_id, "") for record_id in self.page_ids(after=after, limit=limit)]

    def close(self) -> None:
        """Nothing to release."""
