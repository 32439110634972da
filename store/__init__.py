"""vectorsync's data layer: the client, records, filters, settings, vector stores and the query module.

Each name below is imported from its module on first use (PEP 562), so importing one module of ``store``
(``store.contract``, ``store.errors``) costs that module alone, not the settings and the client: the
``vectorsync`` command starts without them. Backends (pgvector, Qdrant) and their drivers load lazily too.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from store.client import Client
    from store.errors import (
        ConfigError,
        EmbeddingError,
        InputError,
        PermanentError,
        ProviderError,
        StoreError,
        StoreUnavailable,
        TransientError,
        VectorsyncError,
    )
    from store.settings import Settings, load_settings
    from store.vectors.backends import memory_store, open_store
    from store.vectors.base import Collection, VectorStore
    from store.vectors.filters import Filter
    from store.vectors.records import VectorMatch, VectorRecord

__all__ = [
    "Client",
    "Collection",
    "ConfigError",
    "EmbeddingError",
    "Filter",
    "InputError",
    "PermanentError",
    "ProviderError",
    "Settings",
    "StoreError",
    "StoreUnavailable",
    "TransientError",
    "VectorMatch",
    "VectorRecord",
    "VectorStore",
    "VectorsyncError",
    "load_settings",
    "memory_store",
    "open_store",
]

#: The module each exported name is defined in.
_HOMES = {
    "Client": "store.client",
    "Collection": "store.vectors.base",
    "ConfigError": "store.errors",
    "EmbeddingError": "store.errors",
    "Filter": "store.vectors.filters",
    "InputError": "store.errors",
    "PermanentError": "store.errors",
    "ProviderError": "store.errors",
    "Settings": "store.settings",
    "StoreError": "store.errors",
    "StoreUnavailable": "store.errors",
    "TransientError": "store.errors",
    "VectorMatch": "store.vectors.records",
    "VectorRecord": "store.vectors.records",
    "VectorStore": "store.vectors.base",
    "VectorsyncError": "store.errors",
    "load_settings": "store.settings",
    "memory_store": "store.vectors.backends",
    "open_store": "store.vectors.backends",
}


def __getattr__(name: str) -> Any:
    """``store.NAME``: imported from its module on first use, then kept here."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'store' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
