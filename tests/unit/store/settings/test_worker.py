"""``[worker]``: a task's limits, retries and schedules, within bounds."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from store.settings.worker import WorkerSettings


def test_an_index_build_may_outlast_a_task_and_beat_runs_sweeps_and_verifies() -> None:
    settings = WorkerSettings()
    assert settings.index_time_limit > settings.time_limit
    assert (settings.reconcile_seconds, settings.verify_seconds, settings.metrics_port) == (3600, 86_400, 0)


@pytest.mark.parametrize(
    "bad",
    [{"batch_size": 10_001}, {"max_redeliveries": 0}, {"metrics_port": 65_536}, {"time_limit": 0}, {"retry_delay": -1}],
)
def test_values_out_of_bounds_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        WorkerSettings.model_validate(bad)
