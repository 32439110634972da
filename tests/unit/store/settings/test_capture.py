"""``[capture]``: how often the relay polls and how much it claims, within bounds."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from store.settings.capture import CaptureSettings


def test_the_relay_runs_in_workers_and_polls_twice_a_second_by_default() -> None:
    settings = CaptureSettings()
    assert (settings.relay, settings.poll_seconds, settings.reconcile_seconds) == (True, 0.5, 86_400)


@pytest.mark.parametrize(
    "bad", [{"poll_seconds": 0}, {"poll_seconds": 3601}, {"claim_rows": 0}, {"reconcile_seconds": -1}]
)
def test_values_out_of_bounds_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        CaptureSettings.model_validate(bad)
