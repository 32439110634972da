"""The local provider: its share of the cores, int8 as a model of its own, and torch where ONNX Runtime cannot
run the model (the model itself: tests/integration/store/embeddings/providers/test_local.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.calls import threads as cpu
from store.embeddings.providers.local import LocalProvider
from store.errors import ConfigError
from store.settings import ModelSettings, Settings


def minilm(**extra: object) -> ModelSettings:
    return ModelSettings.model_validate({"provider": "local", "model": "all-MiniLM-L6-v2", "dimensions": 384, **extra})


def test_the_provider_takes_its_share_unless_threads_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu, "available_cores", lambda: 4)
    monkeypatch.setenv(cpu.PROCESSES_ENV, "2")
    assert LocalProvider(name="m", settings=minilm()).threads == 2
    assert LocalProvider(name="m", settings=minilm(threads=3)).threads == 3
    assert Settings().models == {} and minilm().threads is None  # the default: the share


def test_quantize_needs_the_onnx_backend_and_is_a_model_of_its_own() -> None:
    with pytest.raises(ValueError, match="quantize applies only"):
        minilm(backend="torch", quantize=True)
    assert minilm().backend == "onnx"
    assert LocalProvider(name="m", settings=minilm(quantize=True)).model == "all-MiniLM-L6-v2+int8"
    assert LocalProvider(name="m", settings=minilm()).model == "all-MiniLM-L6-v2"


def test_a_model_onnx_cannot_run_falls_back_to_torch_unless_int8_was_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VECTORSYNC_ONNX_CACHE", str(tmp_path / "onnx"))
    folder = tmp_path / "not-a-model"
    folder.mkdir()
    provider = LocalProvider(name="m", settings=minilm(model=str(folder)))
    assert provider._load_onnx(str(folder)) is None  # a warning; _load then goes to torch
    with pytest.raises(ConfigError, match="quantize needs the ONNX backend"):
        LocalProvider(name="m", settings=minilm(model=str(folder), quantize=True))._load_onnx(str(folder))
