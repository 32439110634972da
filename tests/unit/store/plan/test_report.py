"""A plan's record counts add up from its judged pages."""

from __future__ import annotations

from store.plan import Judged, Plan


def test_records_are_the_sum_of_each_judgement_over_pages() -> None:
    plan = Plan(collection="notes", generation="notes", kind="reindex", entry="small", model="m")
    plan.add(Judged(new=2, changed=1, unchanged=5, failed=1, known=6))
    plan.add(Judged(unchanged=3, known=3))
    assert (plan.new, plan.changed, plan.unchanged, plan.failed, plan.records) == (2, 1, 8, 1, 12)
