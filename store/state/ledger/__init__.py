"""Indexing state: the ledger of what is indexed, record write locks, runs and failures.

``Ledger`` is the seam; ``MemoryLedger`` the reference; ``PostgresLedger``
(loaded only when built, it needs SQLAlchemy) the one workers share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.errors import ConfigError
from store.state.ledger.base import (
    Failure,
    Forgotten,
    Held,
    Ledger,
    LedgerEntry,
    Overview,
    Parked,
    RunProgress,
    RunStatus,
)
from store.state.ledger.memory import MemoryLedger

if TYPE_CHECKING:
    from store.settings import Settings

__all__ = [
    "Failure",
    "Forgotten",
    "Held",
    "Ledger",
    "LedgerEntry",
    "MemoryLedger",
    "Overview",
    "Parked",
    "RunProgress",
    "RunStatus",
    "in_process_only",
    "ledger_from_settings",
]


def in_process_only(settings: Settings) -> bool:
    """Whether the settings keep everything in this process: a memory store and no state database."""
    return settings.vectors.store == "memory" and settings.state_url is None


def ledger_from_settings(settings: Settings, *, memory_fallback: bool = False) -> Ledger:
    """The PostgreSQL ledger at ``[state] url`` (default: the pgvector database). ``memory_fallback``: a memory
    store with no state database gets a memory ledger, which keeps nothing past its process, as that store.
    Raises ConfigError."""
    if memory_fallback and in_process_only(settings):
        return MemoryLedger()
    try:
        from store.state.ledger.postgres import PostgresLedger
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"the state database needs {exc.name!r}, which is not installed: pip install 'vectorsync[pgvector]'"
        ) from None
    return PostgresLedger(settings.state_url, network=settings.network)
