"""store/connect/redis.py: every Redis client made one way, and one translation of its failures."""

from __future__ import annotations

import pytest

from store.connect.redis import redis_client, unavailable
from store.errors import StoreUnavailable
from store.settings import NetworkSettings
from tests.services import free_port


def test_a_client_takes_the_network_options_and_its_own_timeouts() -> None:
    client = redis_client("redis://127.0.0.1:1/0", NetworkSettings(), timeout=0.5, connect_timeout=0.2)
    options = client.connection_pool.connection_kwargs
    assert (options["socket_timeout"], options["socket_connect_timeout"]) == (0.5, 0.2)
    assert options["socket_keepalive"] is True and options["health_check_interval"] > 0


@pytest.mark.parametrize("raised", [ConnectionRefusedError("refused"), TimeoutError("silent")])
def test_what_a_dead_redis_raises_is_store_unavailable_naming_what_failed_and_the_fix(raised: Exception) -> None:
    with pytest.raises(StoreUnavailable) as caught, unavailable("the pool's Redis failed", "try again"):
        raise raised
    assert str(caught.value) == f"the pool's Redis failed: {raised}; try again"


def test_a_redis_that_is_not_there_is_unavailable() -> None:
    client = redis_client(f"redis://127.0.0.1:{free_port()}/0", timeout=0.5)
    with (
        pytest.raises(StoreUnavailable, match=r"^the clock cannot be read: Error 111"),
        unavailable("the clock cannot be read"),
    ):
        client.ping()
    client.close()


def test_other_errors_pass_through() -> None:
    with pytest.raises(KeyError), unavailable("x"):
        raise KeyError("not a Redis failure")
