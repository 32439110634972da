"""Generations of a collection behind its name: what ``vectorsync migrate`` builds and switches.

``Generations`` is the seam; ``MemoryGenerations`` the reference; ``PostgresGenerations`` (loaded only when
built, it needs SQLAlchemy) the registry workers and apps share in the state database. Where a
name's reads and writes go, and the switch, are decided in ``routing``; ``migration`` begins a generation.
"""

from __future__ import annotations

from store.state.generations.base import (
    Alias,
    Generation,
    Generations,
    generation_settings,
    implicit,
    parse_name,
    registered,
)
from store.state.generations.memory import MemoryGenerations

__all__ = [
    "Alias",
    "Generation",
    "Generations",
    "MemoryGenerations",
    "generation_settings",
    "implicit",
    "parse_name",
    "registered",
]
