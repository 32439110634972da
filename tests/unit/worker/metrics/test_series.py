"""A worker's metrics (worker/metrics/series.py): every series whose labels its settings tell, made at 0 at start.

The first scrape of a real worker: tests/integration/deploy/test_observability.py.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path

from prometheus_client import REGISTRY

from store.calls.accounting import ERROR_KINDS, error_kind
from store.contract import QUEUES
from store.errors import ConfigError, InputError, PermanentError, TransientError
from store.settings import Settings
from store.vectors.pgvector.planner import PATHS, Plan
from worker.metrics.series import OUTCOMES, STAGES, known_labels, observe_batch, start_series
from worker.pipeline import indexer
from worker.pipeline.batch import BatchResult

#: The batch indexer, whose ``stage(...)`` blocks are the pipeline's stages.
INDEXER = Path(indexer.__file__)


def settings(*, store: str = "pgvector") -> Settings:
    model = {"provider": "fake", "model": "hash-8", "dimensions": 8}
    return Settings(
        vectors={"store": store, "dimensions": 8},
        models={
            "first": model,
            "second": model | {"requests_per_minute": 60},
            "priced": {"provider": "fake", "model": "hash-8-priced", "dimensions": 8, "price_per_million_tokens": 0.02},
            "ranker": {"task": "rerank", "provider": "fake", "model": "rank"},
        },
        embeddings={"chain": ["first", "second", "priced"], "allow_mixed_models": True},
        collections={"notes": {}, "docs": {}},
    )


def test_the_known_labels_come_from_the_settings() -> None:
    known = known_labels(settings())
    assert known.entries == ("first", "second", "priced")  # the embedding chain: a worker never reranks
    assert known.models == ("hash-8", "hash-8-priced")
    assert known.priced == ("hash-8-priced",)  # cost is counted only at a declared price
    assert known.limited == ("second",)
    assert known.collections == ("notes", "docs")
    assert known.queues == tuple(QUEUES)
    assert known.planned and not known_labels(settings(store="memory")).planned


def value(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def test_start_series_makes_each_known_series_at_zero() -> None:
    assert start_series(settings()) > 0
    for outcome in OUTCOMES:
        assert value("vectorsync_records_total", collection="docs", outcome=outcome) is not None
    for name in ("calls", "retries", "failovers"):
        assert value(f"vectorsync_provider_{name}_total", model="second") is not None
    assert value("vectorsync_model_calls_total", task="embed", model="hash-8", user="") is not None
    assert value("vectorsync_model_cost_total", task="embed", model="hash-8-priced") is not None
    assert value("vectorsync_model_cost_total", task="embed", model="hash-8") is None  # no price, no cost
    assert value("vectorsync_model_errors_total", task="embed", model="first", kind="rate_limited") is not None
    assert value("vectorsync_model_call_seconds_count", task="embed", model="first") is not None
    assert value("vectorsync_rate_limit_wait_seconds_count", model="second") is not None
    assert value("vectorsync_rate_limit_wait_seconds_count", model="first") is None  # no limit, no waits
    assert value("vectorsync_search_seconds_count", collection="notes") is not None
    assert value("vectorsync_search_plans_total", collection="notes", plan="hnsw") is not None
    assert value("vectorsync_stage_seconds_count", stage="embed") is not None
    assert value("vectorsync_embedding_cache_total", result="miss") is not None


def test_the_fixed_label_values_are_the_ones_the_code_writes() -> None:
    result = BatchResult(indexed=["1"], skipped=["2"], deleted=["3"], superseded=["4"], failed={"5": "bad"})
    observe_batch("outcomes", result)
    counted = {
        sample.labels["outcome"]: sample.value
        for metric in REGISTRY.collect()
        if metric.name == "vectorsync_records"
        for sample in metric.samples
        if sample.name.endswith("_total") and sample.labels["collection"] == "outcomes"
    }
    assert counted == dict.fromkeys(OUTCOMES, 1.0)
    assert set(re.findall(r'stage\("(\w+)"\)', INDEXER.read_text())) == set(STAGES)
    assert set(typing.get_args(typing.get_type_hints(Plan)["path"])) == set(PATHS)
    errors = [TransientError("429", rate_limited=True), TransientError("500"), PermanentError("401")]
    errors += [InputError("400"), ConfigError("size"), RuntimeError("bug")]
    assert [error_kind(error) for error in errors] == list(ERROR_KINDS)
