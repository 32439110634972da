"""The thread budget of local models: each process's share of the cores, told by the worker to its pool processes."""

from __future__ import annotations

import pytest

from store.calls import threads as cpu


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
