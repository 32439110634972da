"""What `vectorsync doctor` says of a part no settings file or variable placed: ``default``, never ``ok`` (the real
command from a folder with no settings file: tests/integration/producer/cli/test_doctor.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from producer.cli.doctor import Check, _defaulted, render, to_json, unset
from store.settings import Settings, load_settings


def test_unset_names_the_keys_no_file_or_variable_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("VECTORSYNC_BROKER__URL", "VECTORSYNC_VECTORS__URL", "VECTORSYNC_CONFIG"):
        monkeypatch.delenv(key, raising=False)
    keys = ("broker.url", "vectors.url", "vectors.store", "models", "embeddings.chain")
    assert unset(Settings(), *keys) == keys
    file = tmp_path / "vectorsync.toml"
    file.write_text(
        '[broker]\nurl = "redis://127.0.0.1:6379/0"\n\n[models.m]\nprovider = "fake"\nmodel = "m"\ndimensions = 1536\n'
    )
    assert unset(load_settings(file), *keys) == ("vectors.url", "vectors.store", "embeddings.chain")
    monkeypatch.setenv("VECTORSYNC_VECTORS__URL", "postgresql://db/app")
    assert unset(load_settings(file), *keys) == ("vectors.store", "embeddings.chain")


def test_a_healthy_part_on_defaults_is_marked_default_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    healthy = Check("broker", "ok", 3.0, "redis://127.0.0.1:6379/0")
    marked = _defaulted(healthy, ("broker.url",))
    assert marked.status == "default"
    assert marked.detail == (
        "redis://127.0.0.1:6379/0 (default: broker.url not set in any settings file or VECTORSYNC_* variable)"
    )
    assert _defaulted(healthy, ()) == healthy
    broken = _defaulted(Check("state database", "fail", 1.0, "no state database", "set state.url"), ("state.url",))
    assert broken.status == "fail" and broken.detail.endswith(
        "(default: state.url not set in any settings file or VECTORSYNC_* variable)"
    )
    render(marked)
    line = capsys.readouterr().out
    assert line.startswith("dflt broker ") and not line.startswith("ok")
    parsed = json.loads(to_json([marked]))
    assert parsed["ok"] is True and parsed["checks"][0]["status"] == "default"
