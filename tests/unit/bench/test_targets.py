"""Targets defined once: how each is written and judged, which figure of a row it judges, and a saved row judged
again by today's target."""

from __future__ import annotations

import pytest

from bench.report import Row
from bench.targets import TARGETS, Target, judged, rejudge


@pytest.mark.parametrize(
    ("target", "text", "passes", "fails"),
    [
        (Target(">=", 0.8, "x", "COPY+build"), ">= 0.8x COPY+build", 0.8, 0.79),
        (Target("<=", 15, " ms"), "<= 15 ms", 15.0, 15.01),
        (Target("<", 1, " s"), "< 1 s", 0.99, 1.0),
        (Target("==", 1, says="equal"), "equal", 1, 0),
        (Target("~", 0.5, "x", says="0.5x ± 1%"), "0.5x ± 1%", 0.5049, 0.5051),
    ],
)
def test_a_target_reads_as_written_and_judges_its_bound(target: Target, text: str, passes: float, fails: float) -> None:
    assert target.text() == text
    assert target.met(passes) and not target.met(fails)


def test_a_ratio_target_judges_the_ratio_and_any_other_the_value() -> None:
    row = Row("bulk", "first index", 20.0, "s", ratio=0.5)
    assert Target(">=", 0.8, "x").judges(row) == 0.5
    assert Target("<", 30, " s").judges(row) == 20.0


def test_judged_gives_the_fields_of_a_row() -> None:
    row = Row("live", "p95", 1.5, "s", **judged("live update p95 under a reindex", 1.5))
    assert (row.measure, row.target, row.ok) == (
        "live update p95 under a reindex",
        TARGETS["live update p95 under a reindex"].text(),
        False,
    )


def test_a_saved_row_is_judged_again_by_todays_target_and_keeps_its_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    saved = Row("bulk", "first index", 20.0, "s", ratio=0.6, target=">= 0.5x", ok=True, measure="moved")
    monkeypatch.setitem(TARGETS, "moved", Target(">=", 0.8, "x"))

    again = rejudge(saved)

    assert (again.target, again.ok, again.value, again.ratio) == (">= 0.8x", False, 20.0, 0.6)


def test_a_row_of_no_known_measure_or_without_its_figure_stays_as_it_was() -> None:
    plain = Row("broker", "tasks taken per second", 2600.0, "msg/s", target="as before", ok=True)
    no_ratio = Row("bulk", "x", 1.0, "s", measure="first index against the limit", target="kept", ok=True)
    assert rejudge(plain) == plain
    assert rejudge(no_ratio) == no_ratio
