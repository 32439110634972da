"""``[broker]``, ``[state]``, ``[cache]``, ``[flower]``: where the services are, and the broker's timings in bounds."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from store.settings.services import DEFAULT_BROKER_URL, BrokerSettings, CacheSettings, FlowerSettings, StateSettings


def test_the_broker_is_a_development_redis_until_configured() -> None:
    assert BrokerSettings().url == DEFAULT_BROKER_URL == "redis://127.0.0.1:6379/0"
    assert (StateSettings().url, CacheSettings().url, FlowerSettings().url) == (None, None, None)


@pytest.mark.parametrize(
    "bad", [{"visibility_timeout": 0}, {"coalesce_seconds": -1}, {"socket_timeout": 0}, {"heartbeat": -1}]
)
def test_broker_timings_out_of_bounds_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        BrokerSettings.model_validate(bad)


def test_a_service_s_password_stays_out_of_its_repr() -> None:
    for section in (StateSettings(url="postgresql://app:hunter2@db/x"), CacheSettings(url="redis://:hunter2@r/0")):
        assert "hunter2" not in repr(section)
