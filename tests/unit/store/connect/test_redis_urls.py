"""store/connect/redis_urls.py: each form of Redis URL taken apart once, and what kombu is given for it."""

from __future__ import annotations

import ssl

import pytest

from store.connect.redis import redis_client
from store.connect.redis_urls import kombu_broker, parse_redis_url, redis_form
from store.errors import ConfigError


@pytest.mark.parametrize(
    ("url", "form"),
    [
        ("redis://127.0.0.1:6379/0", "tcp"),
        ("rediss://cache.example.com:6380/0", "tls"),
        ("redis+socket:///run/redis.sock", "socket"),
        ("unix:///run/redis.sock?db=2", "socket"),
        ("sentinel://10.0.0.1:26379;sentinel://10.0.0.2:26379/0?master_name=main", "sentinel"),
        ("amqp://guest:guest@127.0.0.1:5672//", None),
    ],
)
def test_each_url_has_its_form(url: str, form: str | None) -> None:
    assert redis_form(url) == form


def test_a_tls_url_verifies_the_server_unless_it_says_otherwise() -> None:
    parsed = parse_redis_url("rediss://:s3cret@cache.example.com:6380/3?ssl_ca_certs=/etc/ca.pem")
    assert (parsed.hosts, parsed.db, parsed.password) == ((("cache.example.com", 6380),), 3, "s3cret")
    assert parsed.tls == {"ssl_ca_certs": "/etc/ca.pem", "ssl_cert_reqs": ssl.CERT_REQUIRED}
    relaxed = parse_redis_url("rediss://h:6380/0?ssl_cert_reqs=none&ssl_check_hostname=false")
    assert relaxed.tls == {"ssl_cert_reqs": ssl.CERT_NONE, "ssl_check_hostname": False}


def test_kombu_is_given_the_tls_options_apart_from_the_url_and_our_transport() -> None:
    broker = kombu_broker("rediss://:pw@cache.example.com:6380/3?ssl_ca_certs=/etc/ca.pem")
    assert broker.url == "rediss://:pw@cache.example.com:6380/3"
    assert broker.transport == "store.transport.redis:Transport"
    assert broker.use_ssl == {"ssl_ca_certs": "/etc/ca.pem", "ssl_cert_reqs": ssl.CERT_REQUIRED}


@pytest.mark.parametrize("url", ["redis+socket:///run/redis.sock?virtual_host=2", "unix:///run/redis.sock?db=2"])
def test_both_socket_forms_reach_kombu_as_the_socket_transports_own_url(url: str) -> None:
    broker = kombu_broker(url)
    assert (broker.url, broker.transport) == (
        "socket:///run/redis.sock?virtual_host=2",
        "store.transport.redis:SocketTransport",
    )
    assert parse_redis_url(url).path == "/run/redis.sock"


def test_a_sentinel_url_gives_kombu_every_sentinel_the_database_and_the_master_name() -> None:
    broker = kombu_broker("sentinel://:pw@10.0.0.1:26379;sentinel://10.0.0.2/1?master_name=main")
    assert broker.url == "sentinel://:pw@10.0.0.1:26379/1;sentinel://:pw@10.0.0.2:26379/1"
    assert (broker.transport, broker.transport_options) == (
        "store.transport.redis:SentinelTransport",
        {"master_name": "main"},
    )


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sentinel://10.0.0.1:26379/0", r"add \?master_name=NAME"),
        ("sentinel://10.0.0.1:26379/0?master_name=m&service=x", "'service' is not one vectorsync takes"),
        ("rediss://h:6380/0?ssl_cert_reqs=maybe", "ssl_cert_reqs='maybe'.*use required, optional or none"),
        ("rediss://h:6380/0?sslmode=require", "'sslmode' is not one vectorsync takes: use ssl_ca_certs"),
        ("redis+socket:///run/redis.sock?db=first", "Redis database 'first'.*use a number"),
        ("http://h:6380/0", r"http:// is not a Redis URL"),
    ],
)
def test_a_wrong_url_is_a_config_error_naming_the_part_and_the_fix(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_redis_url(url)


def test_every_form_makes_a_redis_py_client_of_its_kind() -> None:
    socket = redis_client("redis+socket:///run/redis.sock?db=2", timeout=1).connection_pool
    assert (socket.connection_kwargs["path"], socket.connection_kwargs["db"]) == ("/run/redis.sock", 2)
    tls = redis_client("rediss://h:6380/0?ssl_ca_certs=/etc/ca.pem", timeout=1).connection_pool
    assert tls.connection_kwargs["ssl_ca_certs"] == "/etc/ca.pem" and "SSL" in tls.connection_class.__name__
    sentinel = redis_client("sentinel://127.0.0.1:26379/4?master_name=main", timeout=1).connection_pool
    assert (sentinel.service_name, sentinel.connection_kwargs["db"]) == ("main", 4)
