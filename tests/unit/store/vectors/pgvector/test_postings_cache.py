"""The decoded-postings cache of pgvector's keyword segments: its byte budget, forgetting merged segments, the
term weights it keeps per avgdl, and each entry's version, its count of postings (a segment's postings of a term
only shrink: a delete purges them, so another count is another version)."""

from __future__ import annotations

import numpy as np

from store.vectors.keyword import bm25
from store.vectors.pgvector.postings_cache import Decoded, PostingsCache


def decoded(count: int) -> Decoded:
    return Decoded(np.arange(count, dtype=np.int64), np.ones(count), np.full(count, 10.0))


def test_the_least_recently_used_go_first_once_over_budget() -> None:
    cache = PostingsCache(budget=decoded(100).nbytes * 2)
    cache.put("t", "a", 1, decoded(100))
    cache.put("t", "b", 2, decoded(100))
    assert cache.get("t", "a", 1) is not None  # a is now the most recent
    cache.put("t", "c", 3, decoded(100))
    assert cache.get("t", "b", 2) is None and cache.held("t", "b") == set()
    assert cache.get("t", "a", 1) is not None and cache.get("t", "c", 3) is not None
    assert cache.used == 2 * decoded(100).nbytes


def test_postings_larger_than_the_budget_are_not_kept() -> None:
    cache = PostingsCache(budget=100)
    cache.put("t", "a", 1, decoded(100))
    assert cache.get("t", "a", 1) is None and cache.used == 0


def test_keep_only_forgets_a_terms_merged_segments() -> None:
    cache = PostingsCache()
    for seg in (1, 2, 3):
        cache.put("t", "a", seg, decoded(10))
    cache.keep_only("t", "a", {3, 4})
    assert cache.held("t", "a") == {3} and cache.used == decoded(10).nbytes


def test_weights_are_the_bm25_term_weights_for_the_avgdl_asked() -> None:
    postings = Decoded(np.array([1, 2], dtype=np.int64), np.array([1.0, 3.0]), np.array([5.0, 20.0]))
    for avgdl in (10.0, 12.5, 10.0):
        expected = [bm25.term_weight(tf, length, avgdl) for tf, length in ((1.0, 5.0), (3.0, 20.0))]
        assert np.allclose(postings.weights(avgdl), expected, rtol=1e-15)


def test_versions_name_each_held_segment_with_its_count() -> None:
    cache = PostingsCache()
    cache.put("t", "a", 1, decoded(10))
    cache.put("t", "a", 2, decoded(3))
    assert cache.versions("t", "a") == {1: 10, 2: 3}
    assert cache.versions("t", "b") == {}


def test_postings_of_another_count_replace_the_held_ones() -> None:
    cache = PostingsCache()
    cache.put("t", "a", 1, decoded(10))
    cache.put("t", "a", 1, decoded(7))  # purged since: read again
    held = cache.get("t", "a", 1)
    assert held is not None and len(held.docs) == 7
    assert cache.used == decoded(7).nbytes


def test_discard_forgets_one_segments_postings_of_a_term() -> None:
    cache = PostingsCache()
    cache.put("t", "a", 1, decoded(10))
    cache.put("t", "a", 2, decoded(10))
    cache.discard("t", "a", 1)
    cache.discard("t", "a", 9)  # none held: nothing to do
    assert cache.get("t", "a", 1) is None and cache.versions("t", "a") == {2: 10}
    assert cache.used == decoded(10).nbytes
