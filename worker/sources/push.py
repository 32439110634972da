"""The source of a collection whose records are pushed with their content (``index_document``).

There is nothing to read back: the newest push is the record's state, and the
ledger's version says which push that is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

from store.errors import ConfigError
from worker.sources.base import SourceRecord

__all__ = ["PushSource"]


class PushSource:
    """Refuses every read, naming the fix: records of this collection arrive with their content."""

    def __init__(self, collection: str) -> None:
        self.collection = collection

    def _refuse(self) -> NoReturn:
        raise ConfigError(
            f"collection {self.collection!r} has no source to read records from (its records are pushed): "
            f"use index_document, or set collections.{self.collection}.source.kind to 'sql' or 'python'"
        )

    def fetch(self, ids: Sequence[str]) -> dict[str, SourceRecord]:
        self._refuse()

    def page_ids(self, *, after: str | None, limit: int) -> list[str]:
        self._refuse()

    def page_stamps(self, *, after: str | None, limit: int) -> list[tuple[str, str]]:
        self._refuse()

    def close(self) -> None:
        """Nothing to release."""
