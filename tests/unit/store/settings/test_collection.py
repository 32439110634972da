"""``[collections.NAME]``: the chunker's overlap below its size, field names a filter can use, the cache's
scope."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from store import ConfigError
from store.settings import load_settings
from store.settings.collection import CollectionSettings, IndexSettings


@pytest.fixture(autouse=True)
def clean_env(no_vectorsync_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "vectorsync.toml"
    path.write_text(text)
    return path


def test_chunker_overlap_must_be_below_max_tokens_at_load(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"chunker overlap \(64\) must be below max_tokens \(64\)"):
        load_settings(write(tmp_path, "[collections.notes.chunker]\nmax_tokens = 64\noverlap = 64\n"))


def test_indexed_and_required_fields_are_dotted_names() -> None:
    index = IndexSettings(fields={"owner.id": "integer", "created_at": "datetime"})
    assert index.fields == {"owner.id": "integer", "created_at": "datetime"}
    for bad in ({"index": {"fields": {"owner id": "integer"}}}, {"required_filter": ["a..b"]}):
        with pytest.raises(ValidationError, match="should match pattern"):
            CollectionSettings.model_validate(bad)
    with pytest.raises(ValidationError, match="'integer', 'float', 'keyword', 'bool' or 'datetime'"):
        IndexSettings.model_validate({"fields": {"n": "number"}})


def test_a_collection_keeps_its_cache_to_itself_unless_it_shares() -> None:
    assert CollectionSettings().cache == "collection"
    assert CollectionSettings(cache="shared").cache == "shared"
    with pytest.raises(ValidationError):
        CollectionSettings.model_validate({"cache": "global"})
