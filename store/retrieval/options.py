"""The keyword options of search and answer, each set stated once for every function that takes it.

``store.query``'s functions, ``Client``'s methods, their async twins and ``Retrieval.answer`` take
``**options: Unpack[SearchOptions]`` or ``Unpack[AnswerOptions]`` (PEP 692): a type checker checks each
keyword of a call, and ``refuse_unknown`` makes a keyword the set does not name the TypeError Python raises
for a plain signature. Defaults are applied where the options are used, once: ``store.retrieval.search.searched``
and ``Retrieval.answer``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, TypedDict

from store.vectors.records import VectorMatch

if TYPE_CHECKING:
    from store.vectors.filters import Filter
    from store.vectors.modes import SearchMode

__all__ = ["Allow", "AnswerOptions", "SearchOptions", "refuse_unknown"]

#: The app's access check: given the matches a search found, return those the caller may read.
Allow = Callable[[list[VectorMatch]], Iterable[VectorMatch]]


class SearchOptions(TypedDict, total=False):
    """A search's options: ``filter`` (a Filter or its JSON form; None), ``limit`` (``DEFAULT_LIMIT``, 10),
    ``min_score`` (None) and ``mode`` (``vector``, ``keyword``, ``hybrid``; None: the collection's)."""

    filter: Filter | Mapping[str, Any] | None
    limit: int
    min_score: float | None
    mode: SearchMode | None


class AnswerOptions(TypedDict, total=False):
    """A grounded answer's options, each None unless given: ``filter``, ``candidates`` and ``top`` (None:
    ``retrieval.candidates`` and ``retrieval.top``), ``user`` (for the cost metrics), ``allow`` (the app's
    access check) and ``mode`` (the search mode of the retrieval)."""

    filter: Filter | Mapping[str, Any] | None
    candidates: int | None
    top: int | None
    user: str | None
    allow: Allow | None
    mode: SearchMode | None


def refuse_unknown(call: str, given: Mapping[str, object], known: AbstractSet[str]) -> None:
    """Raise the TypeError Python raises for a keyword a signature lacks, naming ``call``, when ``given`` holds
    a key outside ``known`` (an option set's ``__optional_keys__``): ``**options`` would take it silently."""
    for key in given:
        if key not in known:
            raise TypeError(f"{call}() got an unexpected keyword argument {key!r}")
