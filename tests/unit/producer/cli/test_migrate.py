"""vectorsync migrate without a state database: one line naming the fix, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from producer.cli import app
from store.process.defaults import use_client


@pytest.mark.parametrize("args", [["--chain", "large"], ["--switch"]])
def test_migrate_without_a_state_database_says_so_in_one_line(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "vectorsync.toml"
    config.write_text('[vectors]\nstore = "memory"\ndimensions = 4\n[collections.notes]\n')
    monkeypatch.setenv("VECTORSYNC_CONFIG", str(config))
    previous = use_client(None)
    try:
        done = CliRunner().invoke(app, ["migrate", "notes", *args])
    finally:
        built = use_client(previous)
        if built is not None:
            built.close()
    assert done.exit_code == 2, done.output
    assert done.output.startswith("error: no state database: set state.url (VECTORSYNC_STATE__URL)"), done.output
    assert "Traceback" not in done.output
