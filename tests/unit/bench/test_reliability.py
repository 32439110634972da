"""The chaos runs' tables: the README's shows the latest long run of each seed, the docs' every run; counts and
an unsettled run read as the tables say them; the kept runs carry every field the tables read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench import reliability

ROOT = Path(__file__).resolve().parents[3]
FIELDS = {"run", "seed", "minutes", "injected", "scheduled", "kinds", "writes", "refused", "lost", "duplicated"}
FIELDS |= {"running", "running_note", "outbox", "settled_s"}


def _run(seed: int, minutes: float, name: str, **changes: Any) -> dict[str, Any]:
    none = {"records": 0, "documents": 0}
    run = {"run": name, "seed": seed, "minutes": minutes, "injected": 9, "scheduled": 10, "kinds": "9 pool kills"}
    run |= {"writes": 1000, "refused": 5, "lost": none, "duplicated": none, "running": 0, "running_note": ""}
    return run | {"outbox": 0, "settled_s": 12} | changes


def test_the_short_table_keeps_the_latest_long_run_of_each_seed_in_their_order() -> None:
    runs = [_run(7, 30, "a"), _run(11, 30, "b"), _run(7, 1.5, "ci"), _run(7, 30, "c"), _run(23, 45, "d")]
    assert [run["run"] for run in reliability.latest(runs)] == ["b", "c", "d"]


def test_counts_and_an_unsettled_run_read_as_the_tables_say_them() -> None:
    lost = {"records": 4445, "documents": 1}
    runs = [_run(7, 30, "x", lost=lost, settled_s=None, running=2, running_note="a sweep")]

    full = reliability.full_table(runs, 300).splitlines()[-1]
    short = reliability.short_table(runs, 300).splitlines()[-1]

    assert full == (
        "| x | 9 of 10: 9 pool kills | 1,000 (5 refused) | 4,445 records, 1 document | 0 | 2 (a sweep) | 0 "
        "| not within 300 s |"
    )
    assert short == "| x | 9 of 10 | 1,000 (5 refused) | 4,445 records, 1 document | 0 | not within 300 s |"


def test_every_kept_run_has_the_fields_the_tables_read() -> None:
    data = json.loads((ROOT / reliability.RUNS).read_text())
    assert isinstance(data["settle_limit_s"], int)
    assert [sorted(FIELDS - set(run)) for run in data["runs"] if FIELDS - set(run)] == []
    assert all(set(run["lost"]) == set(run["duplicated"]) == {"records", "documents"} for run in data["runs"])


def test_a_recorded_chaos_run_is_kept_as_the_tables_read_it() -> None:
    from collections import Counter

    from tests.reliability.chaos import Report
    from tests.reliability.chaos.schedule import schedule

    faults = schedule(7, 120)
    report = Report(7, faults, injected=Counter({"kill_pool": 3, "sigterm": 1}), settled_in=12.4)
    report.writes, report.refused = Counter({"insert": 90, "update": 10}), Counter({"insert": 4})
    report.figures = {"records": 50, "lost": 3, "duplicated": 1, "lost_documents": 1, "duplicated_documents": 0}
    report.figures |= {"running": 0, "outbox": 0}

    entry = report.entry("seed 7, 2 min", 2)

    assert set(entry) >= FIELDS
    assert (entry["injected"], entry["scheduled"], entry["kinds"]) == (4, len(faults), "3 kill_pool, 1 sigterm")
    assert (entry["writes"], entry["refused"], entry["settled_s"]) == (100, 4, 12)
    assert (entry["lost"], entry["duplicated"]) == ({"records": 2, "documents": 1}, {"records": 1, "documents": 0})
    assert (
        reliability.full_table([entry], 300)
        .splitlines()[-1]
        .startswith(
            f"| seed 7, 2 min | 4 of {len(faults)}: 3 kill_pool, 1 sigterm | 100 (4 refused) | 2 records, 1 document |"
        )
    )
