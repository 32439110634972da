"""Each default is stated once, in the settings: what a class uses unconfigured equals what it is built from."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from store.calls.ratelimit import rate_limiters
from store.embeddings import ChainPolicy, Embeddings, FailoverChain
from store.embeddings.providers import FakeProvider, Limits
from store.settings import CollectionSettings, ModelSettings, Settings
from store.vectors import VectorStore
from store.vectors.backends import memory_store
from store.vectors.pgvector import PgvectorStore, PgvectorTuning
from store.vectors.qdrant import QdrantStore, QdrantTuning
from worker.pipeline.chunker import Chunker
from worker.tasks.policy import RetryPolicy

DEFAULTS = Settings()
MODEL = ModelSettings(provider="fake", model="fake", dimensions=4)


def signature_defaults(call: Any) -> dict[str, Any]:
    return {
        name: p.default
        for name, p in inspect.signature(call).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def test_the_chunker_defaults_are_the_settings() -> None:
    settings = CollectionSettings().chunker
    assert Chunker() == Chunker.from_settings(settings)
    assert (Chunker().max_tokens, Chunker().overlap, Chunker().is_markdown) == (
        settings.max_tokens,
        settings.overlap,
        settings.markdown,
    )
    assert Chunker.markdown() == Chunker.from_settings(settings.model_copy(update={"markdown": True}))


def test_the_embedding_defaults_are_the_settings() -> None:
    chain = FailoverChain([FakeProvider(dimensions=4)], dimensions=4)
    built = Embeddings(chain)
    assert (built.batch_size, built.parallelism) == (DEFAULTS.embeddings.batch_size, DEFAULTS.embeddings.parallelism)
    assert ChainPolicy() == ChainPolicy.from_settings(DEFAULTS.embeddings)
    assert chain.policy == ChainPolicy.from_settings(DEFAULTS.embeddings)


def test_provider_limits_default_to_the_model_settings() -> None:
    assert Limits() == Limits.from_settings(MODEL)
    assert FakeProvider(dimensions=4).limits == Limits.from_settings(MODEL)


@pytest.mark.parametrize("store", [PgvectorStore, QdrantStore, memory_store, VectorStore])
def test_store_constructor_defaults_are_the_vector_settings(store: Any) -> None:
    vectors = DEFAULTS.vectors.model_dump()
    found = {k: v for k, v in signature_defaults(store).items() if k in vectors}  # a None default is compared too
    assert {k: list(v) if isinstance(v, tuple) else v for k, v in found.items()} == {k: vectors[k] for k in found}
    assert found.get("metric") == DEFAULTS.vectors.metric


@pytest.mark.parametrize("tuning", [PgvectorTuning, QdrantTuning])
def test_store_tuning_defaults_are_the_vector_settings(tuning: Any) -> None:
    assert tuning() == tuning.from_settings(DEFAULTS.vectors)


def test_pgvector_takes_every_index_setting_from_the_settings() -> None:
    index = (
        "hnsw_m",
        "hnsw_ef_construction",
        "ef_search",
        "table_prefix",
        "exact_search_rows",
        "index_build_workers",
        "precision",
    )
    defaults = signature_defaults(PgvectorTuning)
    assert {k: defaults.get(k, "no such parameter") for k in index} == {k: getattr(DEFAULTS.vectors, k) for k in index}


def test_the_retry_policy_is_the_worker_settings() -> None:
    policy = RetryPolicy.from_settings(DEFAULTS.worker)
    assert (policy.max_retries, policy.retry_delay) == (DEFAULTS.worker.max_retries, DEFAULTS.worker.retry_delay)


def test_models_have_no_rate_limit_by_default() -> None:
    assert (MODEL.requests_per_minute, MODEL.tokens_per_minute) == (None, None)
    assert rate_limiters(DEFAULTS.cache_url, [("m", MODEL)]) == {}  # nothing connects to Redis
    assert FailoverChain.from_settings(DEFAULTS)._failover.limiters == {}
