"""The services vectorsync talks to: ``[broker]``, ``[state]`` and ``[cache]`` (where each lives; the last two
default to another's URL, ``Settings.state_url`` and ``cache_url``) and ``[flower]``."""

from __future__ import annotations

from pydantic import Field

from store.settings.section import Section

__all__ = ["DEFAULT_BROKER_URL", "BrokerSettings", "CacheSettings", "FlowerSettings", "StateSettings"]

#: The broker when none is configured: the Redis a development machine runs.
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/0"


class BrokerSettings(Section):
    url: str = DEFAULT_BROKER_URL
    #: Seconds before Redis hands an unacknowledged task to another worker; above worker.time_limit.
    visibility_timeout: int = Field(default=3600, gt=0)
    #: Seconds an enqueued record is coalesced with later enqueues of it (until its task starts).
    coalesce_seconds: int = Field(default=600, ge=0)
    #: Seconds a command to a Redis broker (a publish, an ack) waits for its answer before the connection
    #: counts as lost and is made again; a consumer's wait for tasks is checked every
    #: network.health_check_interval instead.
    socket_timeout: float = Field(default=30, gt=0)
    #: AMQP (RabbitMQ) heartbeat, seconds: a broker silent for two of them is taken as gone (0: off).
    heartbeat: int = Field(default=30, ge=0)


class FlowerSettings(Section):
    #: Where Flower answers, for ``vectorsync doctor`` (None: not checked).
    url: str | None = None


class StateSettings(Section):
    url: str | None = None  # None: the pgvector database (vectors.url)


class CacheSettings(Section):
    url: str | None = None  # None: the broker's Redis
