"""evaluate() over a memory collection whose query vectors are known: scores worked out by hand."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from store.client import Client
from store.errors import ConfigError
from store.evaluation import EvalQuery, evaluate
from store.settings import Settings
from store.vectors import VectorRecord
from store.vectors.backends import memory_store

#: Query text -> its vector: what the stub embedder answers.
VECTORS = {"alpha": [1.0, 0.05, 0.0], "mixed": [0.6, 0.8, 0.0], "gamma": [0.0, 0.0, 1.0]}
QUERIES = [
    EvalQuery("alpha", ("r1",), line=1),
    EvalQuery("mixed", ("r2", "r3"), line=2),
    EvalQuery("gamma", ("r2",), {"kind": "b"}, line=3),
]


class Stub:
    def embed(self, text: str) -> Sequence[float]:
        return VECTORS[text]


@pytest.fixture
def store():  # type: ignore[no-untyped-def]
    made = memory_store(dimensions=3, embedder=Stub())
    made.get_collection("notes", create=True).upsert_many(
        [
            VectorRecord("r1:0", [1, 0, 0], "one", {"record_id": "r1", "kind": "a"}),
            VectorRecord("r1:1", [0.9, 0.1, 0], "one more", {"record_id": "r1", "kind": "a"}),
            VectorRecord("r2:0", [0, 1, 0], "two", {"record_id": "r2", "kind": "b"}),
            VectorRecord("r3:0", [0, 0, 1], "three", {"record_id": "r3", "kind": "a"}),
        ]
    )
    return made


def test_scores_by_hand(store) -> None:  # type: ignore[no-untyped-def]
    report = evaluate(store.get_collection("notes", create=True), QUERIES, modes=["vector"], k=2)
    alpha, mixed, gamma = report.scores
    assert (alpha.ranked, alpha.recall, alpha.reciprocal_rank, alpha.ndcg) == (("r1", "r2"), 1.0, 1.0, 1.0)
    # mixed: r2 (0.8), r1 (its best chunk, 0.685), then r3 (0): k=2 finds r2 of {r2, r3}.
    assert mixed.ranked == ("r2", "r1")
    assert (mixed.recall, mixed.reciprocal_rank) == (0.5, 1.0)
    assert mixed.ndcg == pytest.approx(1 / (1 + 1 / 1.5849625), abs=1e-6)  # 0.61315
    # gamma under {"kind": "b"}: only r2 is searched, and it is the relevant one.
    assert gamma.ranked == ("r2",) and gamma.ndcg == 1.0
    summary = report.mode("vector")
    assert summary.queries == 3
    assert summary.recall == pytest.approx((1 + 0.5 + 1) / 3)
    assert summary.mrr == 1.0
    assert summary.ndcg == pytest.approx((1 + 0.6131472 + 1) / 3, abs=1e-6)
    assert 0 < summary.p50_ms <= summary.p95_ms
    assert [s.line for s in report.scores] == [1, 2, 3]


def test_k_ten_reads_deeper(store) -> None:  # type: ignore[no-untyped-def]
    mixed = evaluate(store.get_collection("notes", create=True), QUERIES[1:2], modes=["vector"], k=10).scores[0]
    assert mixed.ranked == ("r2", "r1", "r3")
    assert mixed.recall == 1.0
    assert mixed.ndcg == pytest.approx((1 + 0.5) / (1 + 1 / 1.5849625), abs=1e-6)  # r3 at rank 3: 0.91972


def test_a_name_is_read_through_the_client(store) -> None:  # type: ignore[no-untyped-def]
    settings = Settings.model_validate({"vectors": {"store": "memory", "dimensions": 3}})
    with Client(settings, store=store) as client:
        report = evaluate("notes", QUERIES, modes=["vector"], k=2, client=client)
    assert report.collection == "notes"
    assert report.mode("vector").mrr == 1.0
    json.dumps(report.as_dict())  # JSON-plain


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"modes": []}, "no search mode to evaluate: name one or more of vector, keyword, hybrid"),
        ({"modes": ["semantic"]}, "search mode 'semantic' is not known: use vector, keyword, hybrid"),
        ({"modes": ["vector", "vector"]}, "search modes vector, vector name one mode twice: name each once"),
        ({"k": 0}, "k 0 is not allowed: use a whole number from 1 to 10000"),
        ({"k": 5, "chunks": 3}, "chunks 3 is not allowed: use a whole number from k (5) to 10000"),
    ],
)
def test_bad_arguments_are_refused_before_any_search(store, kwargs, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError) as caught:
        evaluate(store.get_collection("notes", create=True), QUERIES, **{"modes": ["vector"], **kwargs})
    assert str(caught.value) == message


def test_no_queries_and_a_mode_not_run_are_refused(store) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="no queries to evaluate"):
        evaluate(store.get_collection("notes", create=True), [], modes=["vector"])
    report = evaluate(store.get_collection("notes", create=True), QUERIES, modes=["vector"])
    with pytest.raises(ConfigError, match=r"mode 'hybrid' was not evaluated \(evaluated: vector\)"):
        report.mode("hybrid")
