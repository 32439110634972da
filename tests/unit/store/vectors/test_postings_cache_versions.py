"""The decoded-postings cache of pgvector's keyword segments knows each entry's version, its count of postings: a
segment's postings of a term only shrink (a delete purges them), so another count is another version."""

from __future__ import annotations

import numpy as np

from store.vectors.pgvector.postings_cache import Decoded, PostingsCache


def decoded(count: int) -> Decoded:
    return Decoded(np.arange(count, dtype=np.int64), np.ones(count), np.full(count, 10.0))


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
