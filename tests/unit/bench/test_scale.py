"""The scale benchmark's settings and figures: the long limits and the keyword twin in its settings, each
phase's per-record cost over the records it concerns, and the growth rows against the target."""

from __future__ import annotations

import tomllib

import pytest

from bench.report import Row
from bench.scale import COLLECTION, LIMITS, SLOW_BUILD, settings_text
from bench.scale_figures import PHASES, Measured, rows_of
from bench.targets import TARGETS

GROWTH = TARGETS["per-record growth"].bound


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
    m.seconds["limit: COPY"], m.seconds["limit: index builds"] = 0.1 * per_record * records, 0.9 * per_record * records
    m.worker_rss = {"w1": 100 * 2**20, "w2": 120 * 2**20}
    m.cpu = {phase: (per_record * records, per_record * records) for phase in ("first index", "limit")}
    m.cpu |= {phase: (per_record * edited, 2 * per_record * edited) for phase in ("1% edit", "capture burst")}
    m.own_build, m.insert_per_chunk = 0.25 * m.seconds["first index"], 4e-4
    return m


def test_edits_are_costed_per_edited_record_and_growth_is_judged_against_the_target() -> None:
    small, large = _measured(10_000, 1e-3), _measured(1_000_000, 1e-3)
    large.seconds["unchanged"] *= 2 * GROWTH  # this phase grows faster than the work
    assert small.per_record("1% edit") == small.per_record("first index") == 1e-3

    rows = rows_of([small, large])
    growth = {row.name.split(": per-record")[0]: row for row in rows if row.section == "scale growth"}

    assert growth["unchanged"].ok is False and growth["unchanged"].value == 2 * GROWTH
    assert all(growth[phase].ok for phase in PHASES if phase != "unchanged")


def test_the_bound_rows_give_cpu_against_the_limit_the_own_build_and_each_insert_growth() -> None:
    small, large = _measured(10_000, 1e-3), _measured(1_000_000, 1e-3)
    large.cpu["limit"] = (0.0, 3 * sum(large.cpu["first index"]))  # the limit's builds grow faster
    large.insert_per_chunk *= 2.5
    rows = rows_of([small, large])

    def row(section: str, start: str) -> Row:
        (found,) = [r for r in rows if r.section == section and r.name.startswith(start)]
        return found

    cpu = row("scale 1,000,000", "first index: CPU seconds")
    assert cpu.unit == "CPU s" and cpu.value == 2 * 1e-3 * 1_000_000 and cpu.ratio == 3
    assert "PostgreSQL 1000.0 s (1,000 us per record)" in cpu.detail
    build = row("scale 10,000", "first index: its own index builds")
    assert build.value == 2.5 and "loading before them 7.5 s (750 us per record)" in build.detail
    assert row("scale 10,000", "capture burst: CPU").value == pytest.approx(3.0)  # CPU ms per edited record: 1 + 2
    assert row("scale growth", "INSERT into the HNSW-indexed table").value == 2.5
    assert row("scale growth", "first index, loading before").value == 1.0
