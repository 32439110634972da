"""The scale benchmark's settings and figures: the long limits and the keyword twin in its settings, each
phase's per-record cost over the records it concerns, and the growth rows against the target."""

from __future__ import annotations

import tomllib

from bench.scale import COLLECTION, GROWTH, LIMITS, PHASES, SLOW_BUILD, Measured, rows_of, settings_text


def test_the_settings_carry_the_long_limits_no_cache_and_keywords_on_the_twin_only() -> None:
    config = tomllib.loads(settings_text("redis://127.0.0.1:1/0", "postgresql://db"))
    assert {key: config["worker"][key] for key in ("time_limit", "index_time_limit")} == {
        key: LIMITS[key] for key in ("time_limit", "index_time_limit")
    }
    assert config["broker"]["visibility_timeout"] == LIMITS["visibility_timeout"]
    assert config["embeddings"] == {"chain": ["fake"], "cache_ttl_days": 0}
    assert config["collections"][f"{COLLECTION}_kw"]["search"] == {"keywords": True}
    assert "search" not in config["collections"][COLLECTION] and "search" not in config["collections"][SLOW_BUILD]
    short = tomllib.loads(settings_text("redis://127.0.0.1:1/0", "postgresql://db", {**LIMITS, "index_time_limit": 5}))
    assert short["worker"]["index_time_limit"] == 5 and short["worker"]["time_limit"] == LIMITS["time_limit"]


def _measured(records: int, per_record: float) -> Measured:
    m = Measured(records, chunks=records, redis_peak=2**20, table_bytes=1000 * records, state_bytes=2**20)
    edited = records // 100
    m.seconds = {phase: per_record * records for phase in PHASES} | {"status": 1.0, "doctor": 2.0}
    m.seconds["1% edit"] = m.seconds["capture burst"] = per_record * edited
    m.worker_rss = {"w1": 100 * 2**20, "w2": 120 * 2**20}
    return m


def test_edits_are_costed_per_edited_record_and_growth_is_judged_against_the_target() -> None:
    small, large = _measured(10_000, 1e-3), _measured(1_000_000, 1e-3)
    large.seconds["unchanged"] *= 2 * GROWTH  # this phase grows faster than the work
    assert small.per_record("1% edit") == small.per_record("first index") == 1e-3

    growth = {row.name.split(":")[0]: row for row in rows_of([small, large]) if row.section == "scale growth"}

    assert growth["unchanged"].ok is False and growth["unchanged"].value == 2 * GROWTH
    assert all(growth[phase].ok for phase in PHASES if phase != "unchanged")
