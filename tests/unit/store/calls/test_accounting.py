"""Model calls in Prometheus: every try of an entry timed, failed tries counted by kind, where failover makes them
(store/calls/accounting.py, store/calls/failover.py); and searches timed (store/vectors/timing.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from prometheus_client import REGISTRY

from store.calls.accounting import error_kind
from store.calls.failover import ChainPolicy, Failover
from store.errors import ConfigError, InputError, PermanentError, TransientError
from store.vectors.memory import MemoryStore
from store.vectors.records import VectorRecord
from tests.backends import unique_name


@dataclass
class Entry:
    name: str
    model: str = "m"


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_each_try_is_timed_and_each_failed_one_counted_by_kind() -> None:
    first, second = Entry(unique_name("first")), Entry(unique_name("second"))
    replies: dict[str, list[BaseException | None]] = {
        first.name: [TransientError("503"), TransientError("429", rate_limited=True)],  # then out of tries
        second.name: [PermanentError("401")],
    }

    def call(entry: Entry) -> str:
        queued = replies[entry.name]
        error = queued.pop(0) if queued else None
        if error is not None:
            raise error
        return entry.name

    failover = Failover(
        [first, second], policy=ChainPolicy(max_attempts=2, max_wait_seconds=0.01, cooldown_seconds=0), what="rerank"
    )
    with pytest.raises(TransientError, match="429"):  # every entry failed, one of them transiently
        failover.run(call)
    assert sample("vectorsync_model_call_seconds_count", task="rerank", model=first.name) == 2
    assert sample("vectorsync_model_errors_total", task="rerank", model=first.name, kind="transient") == 1
    assert sample("vectorsync_model_errors_total", task="rerank", model=first.name, kind="rate_limited") == 1
    assert sample("vectorsync_model_errors_total", task="rerank", model=second.name, kind="permanent") == 1
    assert failover.run(call) == (first.name, first)  # its errors used up: it answers
    assert sample("vectorsync_model_call_seconds_count", task="rerank", model=first.name) == 3
    assert sample("vectorsync_model_errors_total", task="rerank", model=first.name, kind="transient") == 1


def test_error_kinds() -> None:
    kinds = [
        error_kind(e)
        for e in (
            TransientError("x"),
            TransientError("x", rate_limited=True),
            PermanentError("x"),
            InputError("x"),
            ConfigError("x"),
            RuntimeError("x"),
        )
    ]
    assert kinds == ["transient", "rate_limited", "permanent", "input", "config", "other"]


def test_every_search_is_timed_per_collection() -> None:
    name = unique_name("timed")
    collection = MemoryStore(dimensions=2).get_collection(name, create=True)
    collection.upsert(VectorRecord("a", [1.0, 0.0]))
    for _ in range(3):
        assert [m.id for m in collection.search([1.0, 0.0], limit=1)] == ["a"]
    assert sample("vectorsync_search_seconds_count", collection=name) == 3
    assert sample("vectorsync_search_seconds_sum", collection=name) > 0


def test_the_user_label_takes_at_most_max_user_labels_values_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any string the app passed became a label value: a Prometheus cardinality bomb (issue 32, defect 7)."""
    from store.calls import accounting

    monkeypatch.setattr(accounting, "_labelled", set())
    labels = [accounting.user_label(f"user-{i}") for i in range(accounting.MAX_USER_LABELS + 30)]
    assert labels[: accounting.MAX_USER_LABELS] == [f"user-{i}" for i in range(accounting.MAX_USER_LABELS)]
    assert set(labels[accounting.MAX_USER_LABELS :]) == {accounting.OTHER_USERS}
    assert accounting.user_label("user-3") == "user-3" and accounting.user_label("") == ""
    with accounting.attributed_to("someone-new"):
        accounting.record("embed", "text-embedding-test", tokens=5)
    assert (
        REGISTRY.get_sample_value(
            "vectorsync_model_calls_total", {"task": "embed", "model": "text-embedding-test", "user": "other"}
        )
        is not None
    )
