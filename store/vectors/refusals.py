"""The refusals the collection seam gives, stated once: a filter that is not one, a collection that keeps no
keyword index, one that does not exist."""

from __future__ import annotations

from collections.abc import Iterable

from store.errors import ConfigError
from store.vectors.filters import Filter

__all__ = ["check_filter", "missing", "no_keywords"]


def check_filter(filter: object, *, required: bool = False) -> Filter | None:
    if filter is None and not required:
        return None
    if not isinstance(filter, Filter):
        hint = "; to delete everything use drop_collection" if required and filter is None else ""
        raise ConfigError(f"filter must be a Filter (e.g. Filter.eq('kind', 'note')), got {filter!r}{hint}")
    return filter


def no_keywords(name: str, mode: str) -> str:
    """The message for a keyword or hybrid search of collection ``name``, which keeps no keyword index."""
    return (
        f"collection {name!r} keeps no keyword index, so it cannot run a {mode} search: turn it on with "
        f"`vectorsync collections set {name} --keywords` (its stored text is analyzed; nothing is re-embedded)"
    )


def missing(name: str, existing: Iterable[str]) -> str:
    """The message for a collection ``name`` that does not exist: the existing ones, and the fix."""
    known = ", ".join(sorted(existing)) or "none yet"
    return (
        f"collection {name!r} does not exist (existing: {known}): check the name, or declare [collections.{name}] "
        f"and index it (vectorsync reindex {name}), or create it empty (vectorsync collections create {name})"
    )
