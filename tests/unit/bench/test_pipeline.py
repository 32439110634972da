"""The pipeline benchmark's workers get its long time limits through the tests' settings helper, not by
rewriting its text (a rewrite that no longer matched would leave the short limits in silently)."""

from __future__ import annotations

import tomllib

from bench.pipeline import LIMITS
from tests.settings_files import SHORT_LIMITS, settings_toml

PLACES = {"broker": "redis://127.0.0.1:1/0", "cache": "redis://127.0.0.1:1/0", "openai_url": "http://127.0.0.1:1"}


def test_the_benchmark_limits_replace_the_short_ones_and_the_rest_of_worker_stays() -> None:
    config = tomllib.loads(
        settings_toml(**PLACES, database="postgresql://db", table="t", collection="notes", limits=LIMITS)
    )
    assert config["worker"] | {"visibility_timeout": config["broker"]["visibility_timeout"]} == {
        **LIMITS,
        "batch_size": 50,
        "max_retries": 2,
        "retry_delay": 0.2,
        "metrics_port": 0,
    }


def test_without_limits_the_tests_keep_their_short_ones() -> None:
    config = tomllib.loads(settings_toml(**PLACES, database="postgresql://db", table="t", collection="notes"))
    found = {"visibility_timeout": config["broker"]["visibility_timeout"], **config["worker"]}
    assert {key: found[key] for key in SHORT_LIMITS} == SHORT_LIMITS
