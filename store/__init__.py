"""vectorsync's data layer: the client, records, filters, settings, vector stores and the query module.

Backends (pgvector, Qdrant) and their drivers load lazily, on first use.
"""

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
