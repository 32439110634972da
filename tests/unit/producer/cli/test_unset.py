"""Which settings nobody chose: the keys no settings file or ``VECTORSYNC_*`` variable set."""

from __future__ import annotations

from pathlib import Path

import pytest

from producer.cli.unset import all_unset, unset
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


def test_all_unset_is_empty_once_any_one_key_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("VECTORSYNC_VECTORS__URL", "VECTORSYNC_VECTORS__STORE", "VECTORSYNC_CONFIG"):
        monkeypatch.delenv(key, raising=False)
    assert all_unset(Settings(), "vectors.url", "vectors.store") == ("vectors.url", "vectors.store")
    monkeypatch.setenv("VECTORSYNC_VECTORS__URL", "postgresql://db/app")
    assert all_unset(Settings(), "vectors.url", "vectors.store") == ()
