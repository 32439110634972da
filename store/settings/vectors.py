"""``[vectors]``: which vector store holds the collections, and how its index is built and searched."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import Field, SecretStr, model_validator

from store.settings.section import Section

__all__ = ["VectorSettings"]


class VectorSettings(Section):
    store: Literal["pgvector", "qdrant", "memory"] = "pgvector"
    url: str | None = None
    key: SecretStr | None = None
    dimensions: int = Field(default=1536, gt=0, le=65536)
    metric: Literal["cosine", "dot", "euclidean"] = "cosine"
    hnsw_m: int = Field(default=16, ge=2, le=100)
    #: 128, not pgvector's 64: at 1,000,000 clustered vectors 64 builds a graph that even ef_search 1000 cannot
    #: search to recall@10 0.95 (docs/benchmarks.md, "HNSW defaults"); 128 reaches 0.96-0.97 at ef_search 200.
    hnsw_ef_construction: int = Field(default=128, ge=4, le=1000)
    ef_search: int = Field(default=200, ge=1, le=1000)
    #: Prefix of the pgvector table that holds a collection.
    table_prefix: str = Field(default="vs_", pattern=r"^[a-z][a-z0-9_]{0,14}$")
    #: Payload fields Qdrant indexes for filtering, besides record_id.
    index_fields: list[str] = Field(default_factory=list)
    #: A filtered pgvector search whose filter matches at most this many rows (and under 5% of the table)
    #: sorts them exactly by distance; a filter matching more uses the HNSW index with iterative scans.
    exact_search_rows: int = Field(default=10_000, ge=0, le=1_000_000)
    #: Parallel workers PostgreSQL may use to build an HNSW index (besides its leader): this machine's cores
    #: less one, a guess that holds where the database runs on a machine of the same size.
    index_build_workers: int = Field(default_factory=lambda: max(0, (os.cpu_count() or 2) - 1), ge=0, le=64)
    #: How pgvector stores and indexes embeddings: "float" as ``vector(d)`` (4 bytes a dimension), "half" as
    #: ``halfvec(d)`` (2 bytes, HNSW with ``halfvec_*_ops``). Above 2000 dimensions the column is halfvec
    #: whatever this says (pgvector's HNSW indexes vector only up to 2000). pgvector only: another store with
    #: "half" is refused. A table keeps the precision it was made with; opening it with the other is refused.
    precision: Literal["float", "half"] = "float"

    @model_validator(mode="after")
    def _half_is_pgvector_only(self) -> VectorSettings:
        if self.precision == "half" and self.store != "pgvector":
            raise ValueError(
                f'precision "half" is a pgvector storage (halfvec); the {self.store} store keeps float vectors: '
                'set vectors.precision = "float", or use vectors.store = "pgvector"'
            )
        return self
