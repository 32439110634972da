"""One search of one collection under a search's options (``SearchOptions``): the one place their defaults are
applied, for ``store.query``'s functions and ``Client.search`` alike, and a filter read from its JSON form."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from store.retrieval.matches import Matches
from store.vectors.collection import DEFAULT_LIMIT
from store.vectors.filters import Filter, fields_of

if TYPE_CHECKING:
    from store.retrieval.options import SearchOptions
    from store.vectors.collection import Collection

__all__ = ["as_filter", "searched"]


def as_filter(filter: Filter | Mapping[str, Any] | None) -> Filter | None:
    """A Filter from a Filter or its JSON form (``Filter.from_dict``)."""
    if isinstance(filter, Mapping):
        return Filter.from_dict(filter)
    return filter


def searched(target: Collection, query: str | Sequence[float], options: SearchOptions) -> Matches:
    """``target``'s matches for ``query`` under ``options``: the one place a search's defaults are applied. An
    empty result of a filtered search says which of the filter's fields no record holds (``unknown_fields``)."""
    filter = as_filter(options.get("filter"))
    found = target.search(
        query,
        filter=filter,
        limit=options.get("limit", DEFAULT_LIMIT),
        min_score=options.get("min_score"),
        mode=options.get("mode"),
    )
    unknown = target.unheld_fields(fields_of(filter)) if not found and filter is not None else ()
    return Matches(found, called="search", unknown_fields=unknown)
