"""What a plan prices and times: the cost from a declared price alone, and the least time the declared rate
limits allow (the slower of requests and tokens a minute)."""

from __future__ import annotations

import pytest

from store.plan.costing import _rate_limited
from store.settings import ModelSettings


def model(**limits: int) -> ModelSettings:
    return ModelSettings(provider="openai", model="text-embedding-3-small", dimensions=8, **limits)


@pytest.mark.parametrize(
    ("limits", "seconds"),
    [
        ({}, None),
        ({"requests_per_minute": 60}, 120.0),
        ({"tokens_per_minute": 1000}, 300.0),
        ({"requests_per_minute": 60, "tokens_per_minute": 100_000}, 120.0),
    ],
)
def test_the_slower_declared_limit_bounds_the_duration(limits: dict[str, int], seconds: float | None) -> None:
    assert _rate_limited(model(**limits), calls=120, estimated=5000) == seconds
