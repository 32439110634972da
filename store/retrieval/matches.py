"""What a search returns: ``Matches``, a list of ``VectorMatch`` that refuses ``await`` naming the async twin
(``store.retrieval.twins``), and says which filter fields no record holds when it is empty."""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Any, NoReturn

from store.retrieval.twins import sync_misuse
from store.vectors.records import VectorMatch

__all__ = ["Matches"]


class Matches(list[VectorMatch]):
    """The matches ``search`` and ``rerank`` return: a list, which refuses ``await`` naming the async twin.

    ``unknown_fields``: when a filtered search found nothing, the filter's fields that no record of the
    collection holds (``{"owner_id": 7}`` where the records say ``owner``); else ``()``. It is looked up only
    for an empty result, so a search that finds something pays nothing for it.
    """

    __slots__ = ("_called", "unknown_fields")

    def __init__(
        self, matches: Iterable[VectorMatch] = (), *, called: str = "search", unknown_fields: tuple[str, ...] = ()
    ) -> None:
        super().__init__(matches)
        self._called = called
        self.unknown_fields = unknown_fields

    def __await__(self) -> Generator[Any, None, NoReturn]:
        raise TypeError(sync_misuse(self._called))
