"""``reindex --plan`` against the run that follows it, with the worker's tasks run in this process
(``producer.testing``: memory store, the fake model, no cache, so each batch packs its own calls): records, chunks,
calls and estimated tokens predicted equal to what the run then bought, after a first load, an edit, a
metadata-only edit and a chunker change."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from producer import testing
from store.calls.tokens import estimate_tokens
from store.plan import Plan
from worker.repair.plan_reading import PlanReading

RECORDS: dict[str, dict[str, Any]] = {}
WORDS = [
    "renewal",
    "pricing",
    "onboarding",
    "timeline",
    "rollout",
    "budget",
    "contract",
    "seats",
    "discount",
    "invoice",
]


def load_records(ids: list[str] | None) -> Iterable[dict[str, Any]]:
    return [r for key, r in RECORDS.items() if ids is None or key in ids]


def settings(max_tokens: int = 8) -> dict[str, Any]:
    return {
        "collections": {
            "notes": {
                "source": {"kind": "python", "loader": f"{__name__}:load_records"},
                "chunker": {"max_tokens": max_tokens, "overlap": 0},
            }
        },
        "embeddings": {"batch_size": 4},
        "worker": {"batch_size": 10},
    }


def text(i: int) -> str:
    return " ".join(f"{WORDS[(i + k) % len(WORDS)]}{i}" for k in range(12))


@pytest.fixture
def records() -> Iterator[None]:
    RECORDS.clear()
    for i in range(1, 35):
        RECORDS[str(i)] = {"id": str(i), "text": text(i), "metadata": {"kind": "call"}}
    yield
    RECORDS.clear()


class Bought:
    """What the fake model was asked for: calls, texts and their estimated tokens, read from its chain."""

    def __init__(self, tasks: testing.TaskQueue) -> None:
        self.texts: list[str] = []
        self.calls = 0
        provider = tasks.client.embeddings.chain.providers[0]
        embed = provider.embed_batch

        def counted(texts: list[str]) -> list[list[float]]:
            self.calls += 1
            self.texts += texts
            return embed(texts)

        provider.embed_batch = counted  # type: ignore[method-assign]


def planned(tasks: testing.TaskQueue) -> Plan:
    with PlanReading(tasks.client) as reading:
        return tasks.client.plan("notes", reader=reading)


def check(plan: Plan, tasks: testing.TaskQueue) -> Bought:
    """Run the reindex the plan was made for, and compare what it bought with the plan."""
    bought = Bought(tasks)
    tasks.producer.reindex_all("notes")
    tasks.run_queue()
    assert (bought.calls, len(bought.texts)) == (plan.calls, plan.embed)
    assert sum(estimate_tokens(t) for t in bought.texts) == plan.tokens
    assert plan.counted_by == "estimate" and plan.cost is None
    return bought


def test_a_first_load_is_planned_as_the_run_then_does_it(records: None) -> None:
    with testing.queue(settings()) as tasks:
        plan = planned(tasks)
        assert (plan.new, plan.changed, plan.unchanged, plan.gone, plan.failed) == (34, 0, 0, 0, 0)
        assert plan.chunks > 34 and plan.calls > 0 and not plan.pooled
        check(plan, tasks)
        again = planned(tasks)
        assert (again.unchanged, again.embed, again.calls, again.tokens) == (34, 0, 0, 0)


def test_edits_deletes_and_metadata_only_edits_are_planned_as_run(records: None) -> None:
    with testing.queue(settings()) as tasks:
        tasks.producer.reindex_all("notes")
        tasks.run_queue()
        RECORDS["3"]["text"] = text(3) + " and one new closing sentence"
        RECORDS["5"]["metadata"] = {"kind": "email"}  # metadata alone: its vectors are stored already
        RECORDS["40"] = {"id": "40", "text": text(40), "metadata": {"kind": "call"}}
        del RECORDS["7"]
        plan = planned(tasks)
        assert (plan.new, plan.changed, plan.unchanged, plan.gone) == (1, 2, 31, 1)
        assert plan.reused > 0 and 0 < plan.embed < plan.chunks
        check(plan, tasks)
