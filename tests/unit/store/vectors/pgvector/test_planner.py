"""The exact-or-HNSW choice of a filtered pgvector search, without a server (on real tables:
tests/integration/store/vectors/pgvector/test_planner.py)."""

from __future__ import annotations

import pytest

from store.vectors.pgvector.planner import choose_path


@pytest.mark.parametrize(
    ("estimate", "rows", "path"),
    [
        (1_500, 1_000_000, "exact"),  # few rows: always sorted exactly
        (1_500, 10_000, "exact"),  # even as 15% of a small table
        (9_000, 1_000_000, "exact"),  # 0.9% of the table: HNSW would lose recall
        (9_000, 100_000, "hnsw"),  # 9% of the table: HNSW keeps full recall, faster than sorting
        (20_000, 10_000_000, "hnsw"),  # past the bound, whatever the share
    ],
)
def test_the_path_depends_on_the_rows_and_their_share_of_the_table(estimate: int, rows: int, path: str) -> None:
    assert choose_path(estimate, rows, 10_000) == path
