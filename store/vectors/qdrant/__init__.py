"""The Qdrant backend: one Qdrant collection per collection, point ids derived from record ids.

``filters`` compiles a Filter into Qdrant's filter language (with a Python
residual for what Qdrant cannot say exactly), ``collection`` reads and writes
points, ``client`` translates qdrant-client's errors.
"""

from store.vectors.qdrant.filters import split_filter
from store.vectors.qdrant.points import POINT_NAMESPACE, QdrantCollection, point_id
from store.vectors.qdrant.store import QdrantStore, QdrantTuning

__all__ = ["POINT_NAMESPACE", "QdrantCollection", "QdrantStore", "QdrantTuning", "point_id", "split_filter"]
