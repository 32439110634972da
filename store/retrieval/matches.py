"""What a search returns: ``Matches``, a list of ``VectorMatch`` that refuses ``await`` naming the async twin
(``store.retrieval.twins``)."""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Any, NoReturn

from store.retrieval.twins import sync_misuse
from store.vectors.records import VectorMatch

__all__ = ["Matches"]


class Matches(list[VectorMatch]):
    """The matches ``search`` and ``rerank`` return: a list, which refuses ``await`` naming the async twin."""

    __slots__ = ("_called",)

    def __init__(self, matches: Iterable[VectorMatch] = (), *, called: str = "search") -> None:
        super().__init__(matches)
        self._called = called

    def __await__(self) -> Generator[Any, None, NoReturn]:
        raise TypeError(sync_misuse(self._called))
