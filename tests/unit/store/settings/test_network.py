"""What ``[network]`` and the broker's timeouts become on each kind of connection (store/settings/network.py,
store/broker/config.py). The partition scenarios in tests/reliability/test_partitions.py show them at work."""

from __future__ import annotations

import socket

from store.broker.config import HAND_IN_SECONDS, PUBLISH_RETRY_POLICY, celery_config, publish_seconds, soft_time_limit
from store.settings import NetworkSettings, Settings
from store.settings.network import libpq_parameters, redis_options, server_settings, tcp_options


def test_the_defaults_notice_a_silent_peer_within_about_a_minute() -> None:
    network = NetworkSettings()
    idle_for = network.keepalive_idle + network.keepalive_interval * network.keepalive_count
    assert idle_for <= 60 and network.tcp_user_timeout + network.connect_timeout <= 60
    assert Settings().broker.socket_timeout <= 60 and 2 * Settings().broker.heartbeat <= 60


def test_libpq_gets_keepalives_and_timeouts_and_the_server_the_same_as_session_settings() -> None:
    parameters = libpq_parameters(NetworkSettings(tcp_user_timeout=2.5))
    assert parameters == {
        "connect_timeout": 10,
        "keepalives": 1,
        "keepalives_idle": 15,
        "keepalives_interval": 5,
        "keepalives_count": 3,
        "tcp_user_timeout": 2500,
    }
    assert server_settings({**parameters, "keepalives_idle": "60"}) == {  # a URL's own value follows to the server
        "tcp_keepalives_idle": "60",
        "tcp_keepalives_interval": "5",
        "tcp_keepalives_count": "3",
        "tcp_user_timeout": "2500",
    }


def test_redis_over_tcp_gets_keepalive_and_the_health_check_a_unix_socket_the_check_alone() -> None:
    network = NetworkSettings(keepalive_idle=7, health_check_interval=4)
    tcp = redis_options("redis://cache:6379/1", network)
    assert tcp["socket_keepalive"] is True and tcp["health_check_interval"] == 4
    assert tcp["socket_keepalive_options"][socket.TCP_KEEPIDLE] == 7
    assert redis_options("unix:///run/redis.sock", network) == {"health_check_interval": 4}
    assert tcp_options(network)[getattr(socket, "TCP_USER_TIMEOUT", 18)] == 30_000


def test_the_celery_configuration_carries_them_for_redis_and_for_amqp() -> None:
    redis = celery_config(
        Settings(broker={"url": "redis://broker:6379/0", "socket_timeout": 9}, network={"connect_timeout": 4})
    )
    options = redis["broker_transport_options"]
    assert options["socket_timeout"] == 9 and options["socket_connect_timeout"] == 4
    assert options["socket_keepalive"] is True and options["health_check_interval"] == 15
    assert redis["broker_connection_timeout"] == 4 and redis["broker_heartbeat"] == 30
    assert redis["task_acks_on_timeout"] is False  # a task killed at its hard limit is redelivered
    amqp = celery_config(Settings(broker={"url": "amqp://guest@rabbit//", "heartbeat": 20}))
    assert "socket_timeout" not in amqp["broker_transport_options"]  # not an AMQP option
    assert amqp["broker_transport_options"]["socket_settings"] == tcp_options(NetworkSettings())
    assert amqp["broker_heartbeat"] == 20


def test_a_publish_retries_once_and_the_soft_limit_leaves_room_for_one_before_the_hard_limit() -> None:
    partition = Settings(broker={"socket_timeout": 3}, network={"connect_timeout": 2}, worker={"time_limit": 30})
    config = celery_config(partition)
    assert config["task_publish_retry"] is True and config["task_publish_retry_policy"] == PUBLISH_RETRY_POLICY
    assert PUBLISH_RETRY_POLICY["max_retries"] == 1
    assert publish_seconds(partition) == 2 * (2 + 3) + 0.5  # two attempts, each a connect and an answer
    soft, hard = config["task_soft_time_limit"], config["task_time_limit"]
    assert hard - soft >= publish_seconds(partition) + HAND_IN_SECONDS and soft == 17
    assert soft_time_limit(1800, Settings()) == 1800 - 83  # the defaults: 2 x (10 + 30) + 0.5, and 2 s more
    assert soft_time_limit(120, Settings(network={"connect_timeout": 2}, broker={"socket_timeout": 3})) == 90
    assert soft_time_limit(6, Settings()) is None  # timeouts that dwarf the limit: the hard limit alone
    assert (
        celery_config(Settings(worker={"time_limit": 6, "index_time_limit": 7}, broker={"visibility_timeout": 10}))[
            "task_soft_time_limit"
        ]
        is None
    )
