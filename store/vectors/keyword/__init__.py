"""Keyword search: the one analyzer (text to terms) and BM25 as every backend computes it."""

from store.vectors.keyword.analyzer import Analyzer, analyzer
from store.vectors.keyword.bm25 import K1, B, idf, term_weight

__all__ = ["K1", "Analyzer", "B", "analyzer", "idf", "term_weight"]
