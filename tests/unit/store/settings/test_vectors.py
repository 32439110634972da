"""``[vectors]``: the precision pgvector stores embeddings at, refused for another store."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from store import ConfigError
from store.settings import load_settings
from store.settings.vectors import VectorSettings


@pytest.fixture(autouse=True)
def clean_env(no_vectorsync_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "vectorsync.toml"
    path.write_text(text)
    return path


def test_vectors_precision_is_float_by_default_and_half_on_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert load_settings(write(tmp_path, "")).vectors.precision == "float"
    assert load_settings(write(tmp_path, '[vectors]\nprecision = "half"\n')).vectors.precision == "half"
    monkeypatch.setenv("VECTORSYNC_VECTORS__PRECISION", "half")
    assert load_settings(write(tmp_path, "")).vectors.precision == "half"


def test_a_vectors_precision_other_than_float_or_half_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"setting vectors.precision = 'double' is not allowed: .*'float' or 'half'"):
        load_settings(write(tmp_path, '[vectors]\nprecision = "double"\n'))


@pytest.mark.parametrize("store", ["memory", "qdrant"])
def test_half_precision_with_another_store_than_pgvector_is_refused_at_load(tmp_path: Path, store: str) -> None:
    text = f'[vectors]\nstore = "{store}"\nurl = "http://127.0.0.1:6333"\nprecision = "half"\n'
    expected = (
        f'precision "half" is a pgvector storage \\(halfvec\\); the {store} store keeps float vectors: '
        'set vectors.precision = "float", or use vectors.store = "pgvector"'
    )
    with pytest.raises(ConfigError, match=expected):
        load_settings(write(tmp_path, text))


def test_the_table_prefix_is_a_short_lower_case_identifier() -> None:
    assert VectorSettings(table_prefix="app_").table_prefix == "app_"
    for bad in ("App_", "1vs", "a" * 16, "vs-"):
        with pytest.raises(ValidationError, match="table_prefix"):
            VectorSettings(table_prefix=bad)
