"""Every ``toml`` example of README.md and docs/*.md is a settings file ``load_settings`` accepts, whole (the
conventions: tests/docs_examples.py). A fragment is only read as TOML."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from store.errors import ConfigError
from store.settings import load_settings
from tests.docs_examples import Block, blocks

EXAMPLES = blocks("toml")


@pytest.mark.usefixtures("no_vectorsync_env")
@pytest.mark.parametrize("block", EXAMPLES, ids=lambda b: b.where)
def test_a_toml_example_loads_as_a_whole_settings_file(block: Block, tmp_path: Path) -> None:
    tomllib.loads(block.text)
    if block.mark is not None:
        assert block.reason.strip(), f"{block.where}: say why it is not loaded"
        return
    file = tmp_path / "vectorsync.toml"
    file.write_text(block.text)
    load_settings(file)


@pytest.mark.usefixtures("no_vectorsync_env")
def test_the_pages_show_settings_and_a_wrong_key_in_one_would_fail(tmp_path: Path) -> None:
    assert len(EXAMPLES) >= 10
    file = tmp_path / "vectorsync.toml"
    file.write_text(EXAMPLES[0].text + "\n[limits]\nmax_id_charz = 5\n")
    with pytest.raises(ConfigError, match="max_id_charz"):
        load_settings(file)
