"""The shared rate limit without a Redis: bucket names, which models get a limiter, Redis down or not Redis."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from store.calls import ratelimit
from store.calls.ratelimit import bucket_key, rate_limiters
from store.errors import ConfigError
from store.settings import ModelSettings, load_settings
from tests.services import free_port


def test_entries_of_one_model_at_one_endpoint_share_a_bucket_named_without_the_key() -> None:
    small = ModelSettings(
        provider="openai",
        model="text-embedding-3-small",
        dimensions=8,
        base_url="https://api.example.com/v1",
        api_key_env="EXAMPLE_KEY",
        requests_per_minute=10,
    )
    assert bucket_key(small) == bucket_key(
        small.model_copy(update={"api_key_env": "OTHER", "timeout": 5.0, "base_url": "https://api.example.com/v1/"})
    )
    assert bucket_key(small) != bucket_key(small.model_copy(update={"model": "text-embedding-3-large"}))
    assert bucket_key(small) != bucket_key(small.model_copy(update={"base_url": "https://eu.example.com/v1"}))
    assert "EXAMPLE_KEY" not in bucket_key(small) and bucket_key(small).startswith("vectorsync:ratelimit:")


def test_only_limited_models_get_a_limiter_and_limits_must_be_positive(tmp_path: Path) -> None:
    plain = ModelSettings(provider="fake", model="fake", dimensions=4)
    assert rate_limiters("redis://127.0.0.1:6379/0", [("m", plain)]) == {}
    limited = rate_limiters(
        "redis://127.0.0.1:6379/0", [("m", plain), ("n", plain.model_copy(update={"tokens_per_minute": 1000}))]
    )
    assert list(limited) == ["n"]
    config = tmp_path / "vectorsync.toml"
    config.write_text('[models.m]\nprovider = "fake"\nmodel = "fake"\ndimensions = 4\nrequests_per_minute = 0\n')
    with pytest.raises(ConfigError, match=r"setting models.m.requests_per_minute = 0 is not allowed"):
        load_settings(config)


def test_redis_down_means_no_shared_limit_one_warning_and_no_block(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ratelimit, "_warned_in", None)
    port = free_port()  # nothing listens there
    url = f"redis://:sekrit@127.0.0.1:{port}/0"
    model = ModelSettings(provider="fake", model="fake", dimensions=4, requests_per_minute=1)
    limiters = [rate_limiters(url, [(name, model)])[name] for name in ("a", "b")]
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="store.calls.ratelimit"):
        waited = [bucket.acquire() for bucket in limiters for _ in range(5)]
    assert waited == [0.0] * 10 and time.monotonic() - started < 1.5
    assert [record.getMessage() for record in caplog.records] == [
        f"the shared rate limit is off: Redis at redis://127.0.0.1:{port}/0 failed (ConnectionError); model calls "
        "go without it and Redis is tried again every 30s"
    ]
    assert "sekrit" not in caplog.text


def test_a_non_redis_cache_url_leaves_models_unlimited(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ratelimit, "_warned_in", None)
    model = ModelSettings(provider="fake", model="fake", dimensions=4, requests_per_minute=1)
    with caplog.at_level(logging.WARNING, logger="store.calls.ratelimit"):
        assert rate_limiters("amqp://guest:pw@rabbit//", [("m", model)]) == {}
    assert "is not a Redis" in caplog.text and "pw" not in caplog.text
