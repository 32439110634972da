"""Values a person types that the parser or the API misread, found by the fuzzer (tests/unit/test_fuzz_inputs.py):
each refused in words that name the value as typed and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from producer.cli import app


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "vectorsync.toml"
    path.write_text(
        '[vectors]\nstore = "memory"\ndimensions = 8\n[broker]\nurl = "memory://"\n'
        '[embeddings]\ncache_ttl_days = 0\n[collections.docs.source]\nkind = "push"\n'
    )
    return path


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["index", "docs", "-00"], "index"),
        (["search", "docs", "-x"], "search"),
        (["ask", "docs", "-1"], "ask"),
        (["reindex", "-00"], "reindex"),
        (["collections", "recount", "-n"], "collections recount"),
    ],
)
def test_a_value_that_starts_with_a_dash_is_named_whole_with_the_fix(
    config: Path, args: list[str], command: str
) -> None:
    """Before: "No such option: -0" for the id -00 (the parser reads it as the short option -0)."""
    done = CliRunner().invoke(app, ["--config", str(config), *args])
    assert done.exit_code == 2
    flat = " ".join(done.output.replace("│", " ").split())
    assert f"no such option: '{args[-1]}'; a value that starts with '-' goes after '--'" in flat, done.output
    assert f"vectorsync {command} ... -- {args[-1]}" in flat


def test_a_misspelt_long_option_is_still_offered_the_right_one(config: Path) -> None:
    done = CliRunner().invoke(app, ["--config", str(config), "search", "docs", "q", "--limt", "3"])
    assert done.exit_code == 2 and "--limt" in done.output and "--limit" in done.output


@pytest.mark.parametrize("filter", ["false", "1", "[1, 2]", '"kind"'])
def test_a_filter_that_is_json_but_not_an_object_is_refused_in_the_cli_s_words(config: Path, filter: str) -> None:
    """Before: "filter must be a Filter (e.g. Filter.eq('kind', 'note')), got False", the Python API's words."""
    done = CliRunner().invoke(app, ["--config", str(config), "search", "docs", "q", "--filter", filter])
    assert done.exit_code == 2
    assert done.output == (
        f'error: --filter {filter!r} is not a JSON object of field conditions; e.g. --filter \'{{"kind": "call"}}\'\n'
    )
