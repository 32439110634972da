"""The facts at a glance: README.md and docs/ show the tables bench/results.json and the chaos runs give, a
figure or a target changed after the tables were written makes them stale, and the blocks stay between their
markers."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from bench import headline, reliability
from bench.report import Row
from bench.targets import TARGETS, Target

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    return headline.load(ROOT / headline.RESULTS)


def _rendered(rows: list[Row]) -> dict[str, str]:
    return headline.blocks(rows, ROOT / reliability.RUNS)


def test_the_readme_and_the_docs_show_the_tables_the_results_give(rows: list[Row]) -> None:
    stale = headline.stale(ROOT, _rendered(rows))
    assert stale == [], f"{stale}: run `.venv/bin/python -m bench.headline` and commit what it writes"


def test_a_figure_changed_in_the_results_makes_the_readme_and_the_docs_stale(rows: list[Row]) -> None:
    (worst,) = [r for r in rows if r.section == "search clustered 1,000,000" and r.name == "filter 10%: recall@10"]
    better = [replace(r, value=worst.value + 0.5 * (1 - worst.value)) if r is worst else r for r in rows]

    stale = headline.stale(ROOT, _rendered(better))

    assert {"README.md: headline", "docs/benchmarks.md: headline", "docs/benchmarks.md: results"} <= set(stale)


def test_a_target_changed_after_the_run_changes_the_verdict_not_the_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    before = {line.measure: line for line in headline.headline(headline.load(ROOT / headline.RESULTS))}
    monkeypatch.setitem(TARGETS, "filtered recall", Target(">=", 0.5))

    after = {line.measure: line for line in headline.headline(headline.load(ROOT / headline.RESULTS))}

    measure = "Filtered search recall@10, 1,000,000 vectors"
    assert after[measure].ours == before[measure].ours
    assert after[measure].target == ">= 0.5" and after[measure].met


def test_every_headline_row_has_a_figure_a_target_and_a_verdict(rows: list[Row]) -> None:
    lines = headline.headline(rows)
    assert 8 <= len(lines) <= 12
    assert all(line.ours and line.target for line in lines)
    assert len({line.measure for line in lines}) == len(lines)


def test_a_headline_row_whose_results_are_missing_names_the_row() -> None:
    with pytest.raises(LookupError, match="search clustered 100,000"):
        headline.headline([])


def test_a_block_is_written_between_its_markers_and_nothing_else_moves() -> None:
    text = "before\n<!-- t:start -->\nold\n<!-- t:end -->\nafter\n"

    spliced = headline.splice(text, "t", "| a |")

    assert spliced == "before\n<!-- t:start -->\n\n| a |\n\n<!-- t:end -->\nafter\n"
    assert headline.read_block(spliced, "t") == "| a |"
    assert headline.splice(spliced, "t", "| a |") == spliced


def test_a_file_without_the_markers_is_refused_naming_them() -> None:
    with pytest.raises(LookupError, match="<!-- t:start -->"):
        headline.splice("no markers here\n", "t", "| a |")


def test_write_changes_only_files_whose_blocks_differ(tmp_path: Path, rows: list[Row]) -> None:
    rendered = _rendered(rows)
    for file, names in headline.PLACES.items():
        path = tmp_path / file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"<!-- {name}:start -->\n<!-- {name}:end -->\n" for name in names))

    assert sorted(headline.write(tmp_path, rendered)) == sorted(headline.PLACES)
    assert headline.write(tmp_path, rendered) == []
    assert headline.stale(tmp_path, rendered) == []


def test_the_saved_results_name_only_measures_that_have_a_target() -> None:
    saved = json.loads((ROOT / headline.RESULTS).read_text())["rows"]
    assert {row["measure"] for row in saved if row.get("measure")} <= set(TARGETS)
