"""BM25 as every backend computes it (Lucene's form): the constants, the IDF, the term weight.

For a query's distinct terms ``t`` and a document ``d``::

    score(d) = sum over t in d of  idf(t) * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(d) / avgdl))
    idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

``tf`` is how often ``t`` occurs in ``d``, ``len(d)`` its number of terms, ``N`` the number of records with at
least one term, ``avgdl`` their mean length and ``df(t)`` how many of them hold ``t``: statistics of the whole
collection, whatever the search's filter (which only chooses the records scored). The IDF never goes below 0,
so a term in every record still counts a little.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["K1", "B", "idf", "term_weight", "term_weights"]

#: Term frequency saturation.
K1 = 1.2
#: Length normalisation.
B = 0.75


def idf(df: int, n: int) -> float:
    """The inverse document frequency of a term held by ``df`` of ``n`` records."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def term_weight(tf: float, length: float, avgdl: float) -> float:
    """The term-frequency part of a term's score in a document of ``length`` terms (0 when ``tf`` is 0)."""
    return tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avgdl)) if tf else 0.0


def term_weights(tf: np.ndarray, length: np.ndarray, avgdl: float) -> np.ndarray:
    """``term_weight`` over arrays (documents by terms, and each document's length)."""
    norm = K1 * (1 - B + B * length / avgdl)
    return np.where(tf > 0, tf * (K1 + 1) / (tf + norm[:, None]), 0.0)
