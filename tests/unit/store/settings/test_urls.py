"""URLs as messages and logs show them: no user info, secret query parameters hidden."""

from __future__ import annotations

from store.settings.urls import redact_url, without_credentials


def test_an_endpoint_is_shown_as_scheme_host_and_path() -> None:
    assert redact_url("https://user:pw@api.example:8443/v1/?key=k#frag") == "https://api.example:8443/v1"
    assert redact_url("http://[::1]:11434/") == "http://[::1]:11434"
    assert redact_url("https://user:pw@example.test:8443/v1/?key=abc") == "https://example.test:8443/v1"


def test_credentials_are_taken_out_and_secret_parameters_hidden() -> None:
    url = "postgresql://app:hunter2@db:5432/app?sslmode=require&password=pw2&api_key=abc"
    assert without_credentials(url) == "postgresql://db:5432/app?sslmode=require&password=***&api_key=***"
    assert without_credentials("redis://:r3dis@cache:6379/0") == "redis://cache:6379/0"


def test_a_location_that_is_not_a_url_comes_back_unless_it_may_hold_a_secret() -> None:
    assert without_credentials("/var/run/redis.sock") == "/var/run/redis.sock"
    assert without_credentials("user:password@somewhere") == "<URL with credentials>"
    assert without_credentials("http://[::1/") == "<unparseable URL>"


def test_a_url_without_a_host_is_shown_without_its_user_info_not_hidden_whole() -> None:
    """Before: every hostless URL with an ``@`` (a Unix socket's, as ``vectorsync dev`` writes) was shown as
    ``<URL with credentials>``, credentials or not."""
    socket = "postgresql+psycopg://postgres@/vectorsync?host=/tmp/vs-dev/run"
    assert without_credentials(socket) == "postgresql+psycopg:///vectorsync?host=/tmp/vs-dev/run"
    assert without_credentials("postgresql://app:hunter2@/db?host=/run/pg&password=x") == (
        "postgresql:///db?host=/run/pg&password=***"
    )
    assert without_credentials("redis+socket:///run/redis.sock?db=2") == "redis+socket:///run/redis.sock?db=2"
