"""tests/unit needs no server: a unit test that asks for one fails, saying where it belongs.

The fixtures of tests/conftest.py that start or reach PostgreSQL, Redis and RabbitMQ are replaced here by ones that
refuse; fakes that live in the test process (the memory store and ledger, Qdrant's local mode, fakeredis,
the fake OpenAI server) are what unit tests use.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest


def _refused(name: str) -> Callable[[], None]:
    @pytest.fixture(scope="session", name=name)
    def refuse() -> None:
        pytest.fail(
            f"a test in tests/unit asked for {name}: unit tests need no server; "
            "move it to the same place under tests/integration"
        )

    return refuse


postgres_url = _refused("postgres_url")
redis_url = _refused("redis_url")
broker_redis_url = _refused("broker_redis_url")
scratch_redis_url = _refused("scratch_redis_url")
amqp_url = _refused("amqp_url")
