"""The embedding subsystem: texts in, vectors out, through a cache and a failover chain of providers.

``embeddings`` holds the facade (``Embeddings``), ``embedding`` the value it
returns (``Embedding``), ``failover`` the chain with
tenacity retries, ``batching`` the token-aware provider calls, ``cache`` the
Redis cache, ``providers`` one module per technology behind one seam.
"""

from store.calls.accounting import EmbeddingStats
from store.embeddings.chain import ChainPolicy, FailoverChain
from store.embeddings.embedding import Embedding
from store.embeddings.embeddings import Embeddings, Reuse

__all__ = ["ChainPolicy", "Embedding", "EmbeddingStats", "Embeddings", "FailoverChain", "Reuse"]
