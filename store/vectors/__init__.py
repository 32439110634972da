"""Vector storage: records, filters, the ``Collection``/``VectorStore`` seam and its backends.

``memory`` is the reference backend; ``pgvector`` and ``qdrant`` load their
drivers only when a store of theirs is built.
"""

from store.vectors.base import Collection, Metric, QueryEmbedder, VectorStore
from store.vectors.filters import Filter
from store.vectors.modes import SearchMode
from store.vectors.records import VectorMatch, VectorRecord

__all__ = [
    "Collection",
    "Filter",
    "Metric",
    "QueryEmbedder",
    "SearchMode",
    "VectorMatch",
    "VectorRecord",
    "VectorStore",
]
