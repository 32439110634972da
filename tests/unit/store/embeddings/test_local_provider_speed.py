"""The local provider at full speed: each process's share of the cores, and length-sorted batches that still
give the vectors back in the caller's order."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.calls import threads as cpu
from store.embeddings.providers.local import LocalProvider
from store.embeddings.providers.onnx import length_batches
from store.errors import ConfigError
from store.settings import ModelSettings, Settings

TEXTS = [
    "Invoice paid.",
    "The customer is worried about how long onboarding takes for nurses on night shifts, and asked for short "
    "video lessons instead of live sessions, because their staff have little time for training.",
    "Renewal in November; the new CFO reviews every vendor.",
    "ok",
    "Exports from the reporting module are slow; engineering has a fix scheduled and we promised an update "
    "every two days.",
    "Pricing tiers above 500 seats?",
]


def minilm(**extra: object) -> ModelSettings:
    return ModelSettings.model_validate({"provider": "local", "model": "all-MiniLM-L6-v2", "dimensions": 384, **extra})


# -- the thread budget ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cores", "processes", "override", "threads"),
    [
        (2, 2, None, 1),  # vectorsync dev: two pool processes on two cores
        (8, 3, None, 2),  # cores // processes, rounded down
        (2, 4, None, 1),  # more processes than cores: never below 1
        (4, 1, None, 4),  # one process takes every core
        (2, 2, 3, 3),  # [models.NAME] threads wins
        (8, 2, 0, 1),  # even an override never goes below 1
    ],
)
def test_thread_budget_is_cores_over_processes_or_the_setting(
    cores: int, processes: int, override: int | None, threads: int
) -> None:
    assert cpu.thread_budget(cores, processes, override) == threads


@pytest.mark.parametrize(("value", "processes"), [(None, 1), ("3", 3), ("0", 1), ("many", 1)])
def test_processes_sharing_the_cores_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str | None, processes: int
) -> None:
    if value is None:
        monkeypatch.delenv(cpu.PROCESSES_ENV, raising=False)
    else:
        monkeypatch.setenv(cpu.PROCESSES_ENV, value)
    assert cpu.local_processes() == processes


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


# -- length-sorted batches, vectors in input order ------------------------------------------------


def test_length_batches_cover_every_text_once_longest_first() -> None:
    batches = list(length_batches(TEXTS, 4))
    assert [len(b) for b in batches] == [4, 2]
    order = [i for b in batches for i in b]
    assert sorted(order) == list(range(len(TEXTS)))
    assert [len(TEXTS[i]) for i in order] == sorted(map(len, TEXTS), reverse=True)


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
