"""The source seam: where a collection's records come from, read by id or page by page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Source", "SourceRecord"]


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """A record's current state: its id, the text to embed and its metadata.

    ``stamp`` is the source's change marker (a SQL ``updated_at`` as text), or
    "" when the source keeps none.
    """

    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    stamp: str = ""


class Source(Protocol):
    """What the pipeline needs from a source; ids are strings everywhere.

    Raises StoreUnavailable when the source cannot be reached, ConfigError when
    it cannot be read at all (a pushed collection has nothing to read).
    """

    def fetch(self, ids: Sequence[str]) -> dict[str, SourceRecord]:
        """The records among ``ids`` that exist now (absent ones are gone)."""
        ...

    def page_ids(self, *, after: str | None, limit: int) -> list[str]:
        """Up to ``limit`` ids after ``after`` in the source's stable order (keyset paging)."""
        ...

    def page_stamps(self, *, after: str | None, limit: int) -> list[tuple[str, str]]:
        """``page_ids`` with each record's stamp ("" when the source keeps none), for reconcile sweeps."""
        ...

    def close(self) -> None: ...
