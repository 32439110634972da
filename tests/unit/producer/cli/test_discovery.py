"""Which settings file a command reads: named, ./vectorsync.toml, or the one ``vectorsync dev`` made in this folder
or above; and a command that read none says where it looked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from producer.cli.app import app
from producer.cli.discovery import DEV_CONFIG, DEV_MADE, LOCAL_CONFIG, NOT_LOOKED, discover, found


@pytest.fixture
def nested(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout with a dev settings file, and a folder two levels inside it as the working folder."""
    monkeypatch.delenv("VECTORSYNC_CONFIG", raising=False)  # and whatever discover() sets is taken back after
    (tmp_path / DEV_CONFIG).parent.mkdir()
    (tmp_path / DEV_CONFIG).write_text('[vectors]\nstore = "memory"\ndimensions = 8\n')
    inside = tmp_path / "app" / "notes"
    inside.mkdir(parents=True)
    monkeypatch.chdir(inside)
    return tmp_path


def test_a_dev_file_above_is_found_and_read(nested: Path) -> None:
    found = discover()
    assert (found.path, found.how) == (nested / DEV_CONFIG, DEV_MADE)
    assert os.environ["VECTORSYNC_CONFIG"] == str(nested / DEV_CONFIG)


def test_a_named_file_then_the_folder_s_own_come_before_a_dev_file(
    nested: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (Path.cwd() / LOCAL_CONFIG).write_text("")
    assert discover().path == Path.cwd() / LOCAL_CONFIG
    monkeypatch.setenv("VECTORSYNC_CONFIG", "/elsewhere/vectorsync.toml")
    assert discover().path == Path("/elsewhere/vectorsync.toml")


def test_with_no_file_anywhere_an_error_says_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VECTORSYNC_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    failed = CliRunner().invoke(app, ["status"])
    assert failed.exit_code == 2
    assert "no settings file read: looked for --config, VECTORSYNC_CONFIG, ./vectorsync.toml" in failed.output
    said = " ".join(failed.output.split())
    assert ".vectorsync-dev/vectorsync.toml here and in the folders above" in said
    # The fix first, on the one line: the setting named after it is missing only because no file was read.
    assert said.startswith("error: no settings file read:"), said
    assert "or name it: VECTORSYNC_CONFIG=path/to/vectorsync.toml. With every setting at its default: " in said


def test_a_command_says_it_reads_the_dev_file_and_no_error_blames_a_missing_one(nested: Path) -> None:
    ran = CliRunner().invoke(app, ["status"])
    said = " ".join(ran.output.split())
    assert f"settings: {nested / DEV_CONFIG} (made by `vectorsync dev`" in said
    assert "no settings file read" not in said


def test_what_was_found_lasts_for_its_command_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error raised later in the same process, outside a command, blames no settings file."""
    monkeypatch.delenv("VECTORSYNC_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    CliRunner().invoke(app, ["status"])
    assert found() == NOT_LOOKED
