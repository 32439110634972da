"""What ``[network]`` and the broker's timeouts become on each kind of connection (store/settings/network.py,
store/broker/config.py). The partition scenarios in tests/reliability/test_partitions.py show them at work."""

from __future__ import annotations

import socket

from store.broker.config import celery_config
from store.settings import NetworkSettings, Settings
from store.settings.network import libpq_parameters, redis_options, server_settings, tcp_options


def test_the_defaults_notice_a_silent_peer_within_about_a_minute() -> None:
    network = NetworkSettings()
    idle_for = network.keepalive_idle + network.keepalive_interval * network.keepalive_count
    assert idle_for <= 60 and network.tcp_user_timeout + network.connect_timeout <= 60
    assert Settings().broker.socket_timeout <= 60 and 2 * Settings().broker.heartbeat <= 60


def test_libpq_gets_keepalives_and_timeouts_and_the_server_the_same_as_session_settings() -> None:
    parameters = libpq_parameters(NetworkSettings(tcp_user_timeout=2.5))
    assert parameters == {"connect_timeout": 10, "keepalives": 1, "keepalives_idle": 15, "keepalives_interval": 5,
                          "keepalives_count": 3, "tcp_user_timeout": 2500}
    assert server_settings({**parameters, "keepalives_idle": "60"}) == {  # a URL's own value follows to the server
        "tcp_keepalives_idle": "60", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3",
        "tcp_user_timeout": "2500"}


def test_redis_over_tcp_gets_keepalive_and_the_health_check_a_unix_socket_the_check_alone() -> None:
    network = NetworkSettings(keepalive_idle=7, health_check_interval=4)
    tcp = redis_options("redis://cache:6379/1", network)
    assert tcp["socket_keepalive"] is True and tcp["health_check_interval"] == 4
    assert tcp["socket_keepalive_options"][socket.TCP_KEEPIDLE] == 7
    assert redis_options("unix:///run/redis.sock", network) == {"health_check_interval": 4}
    assert tcp_options(network)[getattr(socket, "TCP_USER_TIMEOUT", 18)] == 30_000


def test_the_celery_configuration_carries_them_for_redis_and_for_amqp() -> None:
    redis = celery_config(Settings(broker={"url": "redis://broker:6379/0", "socket_timeout": 9},
                                   network={"connect_timeout": 4}))
    options = redis["broker_transport_options"]
    assert options["socket_timeout"] == 9 and options["socket_connect_timeout"] == 4
    assert options["socket_keepalive"] is True and options["health_check_interval"] == 15
    assert redis["broker_connection_timeout"] == 4 and redis["broker_heartbeat"] == 30
    assert redis["task_acks_on_timeout"] is False  # a task killed at its hard limit is redelivered
    amqp = celery_config(Settings(broker={"url": "amqp://guest@rabbit//", "heartbeat": 20}))
    assert "socket_timeout" not in amqp["broker_transport_options"]  # not an AMQP option
    assert amqp["broker_transport_options"]["socket_settings"] == tcp_options(NetworkSettings())
    assert amqp["broker_heartbeat"] == 20
