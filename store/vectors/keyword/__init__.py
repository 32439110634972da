"""Keyword search: the one analyzer (text to terms) and BM25 as every backend computes it (``bm25``, which
needs numpy: imported by the backends that score, never by ``import store`` or ``import producer``)."""

from store.vectors.keyword.analyzer import Analyzer, analyzer

__all__ = ["Analyzer", "analyzer"]
