"""The pictures' figures from saved rows: each phase's cost per record (edits per edited record), filtered
search's recall and p95 by selectivity; and both pictures drawn."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import pictures
from bench.report import Row


def test_the_scale_curve_costs_edits_per_edited_record_and_the_rest_per_record() -> None:
    rows = [
        Row("scale 10,000", "first index", 4.0, "s"),
        Row("scale 1,000,000", "first index", 700.0, "s"),
        Row("scale 10,000", "1% edit", 0.5, "s"),
        Row("scale 10,000", "first index: CPU seconds, all processes", 9.0, "CPU s"),
        Row("scale growth", "first index", 1.7, "x"),
    ]
    assert pictures.scale_series(rows) == {
        "first index": [(10_000, 400.0), (1_000_000, 700.0)],
        "1% edit": [(10_000, 5_000.0)],
    }


def test_filtered_search_pairs_recall_and_p95_of_each_filter_in_the_order_drawn() -> None:
    rows = [
        Row("search clustered 100,000", "filter 1%: recall@10", 0.98, ""),
        Row("search clustered 100,000", "filter 1%: p50 / p95", 8.0, "ms p95"),
        Row("search clustered 100,000", "filter 100%: p50 / p95", 7.0, "ms p95"),
        Row("search clustered 100,000", "filter 100%: recall@10", 1.0, ""),
        Row("search clustered 100,000", "no filter: recall@10", 1.0, ""),
        Row("search clustered 100,000", "filter 10%: recall@10", 0.9, ""),  # no p95: not drawn
    ]
    assert pictures.search_series(rows) == {"clustered 100,000": {"100%": (1.0, 7.0), "1%": (0.98, 8.0)}}


@pytest.mark.parametrize("which", ["scale", "search"])
def test_both_pictures_are_drawn_as_png(tmp_path: Path, which: str) -> None:
    path = tmp_path / f"{which}.png"
    if which == "scale":
        pictures.draw_scale({"first index": [(10_000, 400.0), (100_000, 500.0)], "limit": [(10_000, 200.0)]}, path)
    else:
        pictures.draw_search({"clustered 100,000": {"100%": (1.0, 7.0), "1%": (0.98, 8.0)}}, path)
    assert path.read_bytes().startswith(b"\x89PNG")
