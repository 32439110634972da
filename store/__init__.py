"""vectorsync's data layer: records, filters, settings, vector stores and the query module.

Backends (pgvector, Qdrant) and their drivers load lazily, on first use.
"""

from store.collection import Collection, VectorStore
from store.errors import (
    ConfigError,
    EmbeddingError,
    InputError,
    PermanentError,
    StoreError,
    StoreUnavailable,
    TransientError,
    VectorsyncError,
)
from store.filters import Filter
from store.records import VectorMatch, VectorRecord
from store.settings import Settings, load_settings

__all__ = [
    "Collection",
    "ConfigError",
    "EmbeddingError",
    "Filter",
    "InputError",
    "PermanentError",
    "Settings",
    "StoreError",
    "StoreUnavailable",
    "TransientError",
    "VectorMatch",
    "VectorRecord",
    "VectorStore",
    "VectorsyncError",
    "load_settings",
]
