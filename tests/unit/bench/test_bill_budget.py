"""The bill bench's count of chunks lost and duplicated after a resumed budget."""

from __future__ import annotations

from bench.bill_budget import chunks_off

EXPECTED = {"1:0": ("a", {}), "1:1": ("b", {}), "2:0": ("c", {})}


def test_chunks_missing_or_not_as_expected_are_lost_and_rows_beyond_the_rest_duplicated() -> None:
    assert chunks_off(EXPECTED, dict(EXPECTED), 3) == (0, 0)
    assert chunks_off(EXPECTED, {"1:0": ("a", {}), "2:0": ("stale", {})}, 2) == (2, 1)  # 1:1 gone, 2:0 stale
    assert chunks_off(EXPECTED, {**EXPECTED, "3:0": ("x", {})}, 4) == (0, 1)  # a chunk of no expected record
