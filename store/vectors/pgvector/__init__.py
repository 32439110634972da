"""The pgvector backend: a PostgreSQL table per collection, HNSW search, COPY writes.

Filtered searches use pgvector's iterative index scans, so a selective filter
still fills ``limit``. ``schema`` says what a table holds, ``filters`` how a
Filter becomes SQL, ``table`` how a collection's rows are read, ``writing`` how they are written.
"""

from store.vectors.pgvector.filters import compile_filter
from store.vectors.pgvector.store import PgvectorStore, PgvectorTuning
from store.vectors.pgvector.table import PgvectorCollection

__all__ = ["PgvectorCollection", "PgvectorStore", "PgvectorTuning", "compile_filter"]
