"""Generations of a collection behind its name: what ``vectorsync migrate`` builds and switches.

``Generations`` is the seam; ``MemoryGenerations`` the reference; ``PostgresGenerations`` (loaded only when
built, it needs SQLAlchemy) the registry workers and apps share in the state database.
"""

from __future__ import annotations

from store.state.generations.base import (
    Alias,
    Generation,
    Generations,
    generation_settings,
    implicit,
    parse_name,
    reading,
    registered,
    writing,
)
from store.state.generations.memory import MemoryGenerations

__all__ = ["Alias", "Generation", "Generations", "MemoryGenerations", "generation_settings", "implicit",
           "parse_name", "reading", "registered", "writing"]
