"""``[models.NAME]``, ``[embeddings]`` and ``[retrieval]``: each model and the task it serves, the embedding
chain that calls them in failover order, and the rerank and answer chains."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator, model_validator

from store.settings.section import Section

__all__ = ["PROVIDERS", "BatchLaneSettings", "EmbeddingSettings", "ModelSettings", "RetrievalSettings"]

#: Which providers serve which task.
PROVIDERS = {
    "embed": ("openai", "ollama", "local", "fake"),
    "rerank": ("openai", "http", "local", "fake"),
    "chat": ("openai", "fake"),
}


class BatchLaneSettings(Section):
    """``[models.NAME.batch]``: the model's batch lane, the provider's batch endpoint (``docs/batch-lane.md``). An
    embedding model of provider ``openai`` only: OpenAI's Batch API, and what speaks it."""

    #: What the provider charges for a million input tokens through its batch endpoint (OpenAI: half the
    #: synchronous price). None: no cost shown, as for the model's own price.
    price_per_million_tokens: float | None = None
    #: Hours a run accepts to wait for one provider job before its unfinished lines go the other way
    #: (``on_failure``); at most the provider's completion window, 24 h for OpenAI.
    max_wait_hours: float = Field(default=24, gt=0, le=24)
    #: The fewest texts worth a batch: a run with fewer to buy buys them through the failover chain at once.
    min_inputs: int = Field(default=1000, ge=1)
    #: Lines the provider failed, and the lines of a job that expired or was cancelled: through the failover
    #: chain at the synchronous price ("chain"), or sent in a new job ("batch").
    on_failure: Literal["chain", "batch"] = "chain"
    #: Seconds between two looks at a run's jobs.
    poll_seconds: float = Field(default=60, gt=0, le=3600)
    #: The provider's limits on one job's file: requests, and bytes.
    max_requests: int = Field(default=50_000, gt=0, le=50_000)
    max_bytes: int = Field(default=200_000_000, gt=0, le=200_000_000)

    @field_validator("price_per_million_tokens")
    @classmethod
    def _a_price(cls, price: float | None) -> float | None:
        return _price(price)


class ModelSettings(Section):
    #: What the model does: embed texts, rerank passages, or answer (chat).
    task: Literal["embed", "rerank", "chat"] = "embed"
    provider: Literal["openai", "ollama", "local", "http", "fake"]
    model: str
    #: Vector size of an embedding model (required for task = "embed", unused otherwise).
    dimensions: int = Field(default=0, ge=0, le=65536)
    base_url: str | None = None
    #: The name of the environment variable that holds the key (never the key itself).
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=100)
    #: Azure OpenAI: the api-version query parameter; the deployment goes in ``model``.
    api_version: str | None = None
    timeout: float = Field(default=30.0, gt=0)
    #: Whether to send ``dimensions`` to the API (OpenAI text-embedding-3 models take it).
    send_dimensions: bool = False
    max_inputs: int = Field(default=2048, gt=0)
    max_tokens_per_request: int = Field(default=300_000, gt=0)
    max_tokens_per_input: int = Field(default=8192, gt=0)
    #: Requests a minute the provider allows this model: every process waits its turn in one budget shared
    #: through Redis at ``cache.url`` (``store.calls.ratelimit``). None: no limit.
    requests_per_minute: int | None = Field(default=None, gt=0)
    #: Estimated tokens a minute the provider allows this model, shared the same way. None: no limit.
    tokens_per_minute: int | None = Field(default=None, gt=0)
    #: The request shape of an ``http`` reranker: Cohere's (also Jina's and vLLM's) or Hugging Face TEI's.
    rerank_api: Literal["cohere", "tei"] = "cohere"
    #: ``local`` models: threads of torch / ONNX Runtime in each process. None: this machine's cores divided
    #: by the processes that share them (a worker's pool size, or $VECTORSYNC_LOCAL_PROCESSES), at least 1,
    #: so two pool processes do not each start a thread per core and fight over the cores.
    threads: int | None = Field(default=None, gt=0, le=1024)
    #: ``local`` embedding models: ONNX Runtime (exported once from the model's own weights into a cache
    #: folder, offline; the same vectors, faster on CPU) or torch (sentence-transformers as it comes).
    backend: Literal["onnx", "torch"] = "onnx"
    #: ``local`` with backend "onnx": int8 weights (per-channel dynamic quantisation). Faster, but the vectors
    #: move a little (cosine ~0.99 to the float ones), so it counts as another model: its cache entries and
    #: ledger rows are its own, and turning it on or off re-embeds on the next reindex.
    quantize: bool = False
    #: An embedding model: the name its vectors are cached and recorded under. None: the model's name, with
    #: ``@`` and the base_url when one is set (another server may serve other weights under the same name).
    #: Give endpoints that serve the same weights the same name, so that they share cached vectors.
    weights: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[^\x00-\x1f,]+$")
    #: What the provider charges for a million input tokens, in your currency; spend and plans show cost only
    #: where it is declared (never a guessed price). None: no cost shown.
    price_per_million_tokens: float | None = None
    #: Its batch lane; None: runs of this model buy through the failover chain only.
    batch: BatchLaneSettings | None = None

    @field_validator("price_per_million_tokens")
    @classmethod
    def _a_price(cls, price: float | None) -> float | None:
        return _price(price)

    @model_validator(mode="after")
    def _provider_serves_task(self) -> ModelSettings:
        if self.provider not in PROVIDERS[self.task]:
            raise ValueError(
                f"provider {self.provider!r} cannot serve task {self.task!r}: use one of "
                f"{', '.join(PROVIDERS[self.task])}"
            )
        if self.quantize and (self.provider != "local" or self.backend != "onnx"):
            raise ValueError("quantize applies only to provider 'local' with backend 'onnx'")
        if self.batch is not None and (self.task != "embed" or self.provider != "openai"):
            raise ValueError(
                f"model {self.model!r}: [batch] is a batch endpoint of OpenAI's Batch API; only an embedding model "
                "of provider 'openai' has one: remove [batch] from this model"
            )
        if self.task == "embed" and not self.dimensions:
            raise ValueError(f"model {self.model!r} embeds, so dimensions is required (the size of its vectors)")
        return self


def _price(price: float | None) -> float | None:
    if price is not None and not (price >= 0 and math.isfinite(price)):
        raise ValueError(
            "a price is 0 or more: what the provider charges for a million tokens (e.g. 0.02), "
            "or leave it out to show no cost"
        )
    return price


class EmbeddingSettings(Section):
    chain: list[str] = Field(default_factory=list)
    batch_size: int = Field(default=96, gt=0, le=2048)
    #: Days a cached vector lives (0: no cache); at most ten years.
    cache_ttl_days: float = Field(default=30, ge=0, le=3650)
    #: Concurrent provider calls per ``embed_many``.
    parallelism: int = Field(default=4, gt=0, le=64)
    #: Entries with different model names embed into different spaces: opt in explicitly.
    allow_mixed_models: bool = False
    #: Seconds a model that keeps failing is skipped before it is tried again.
    cooldown_seconds: float = Field(default=60, ge=0)
    max_attempts: int = Field(default=5, gt=0)
    max_wait_seconds: float = Field(default=30, gt=0)


class RetrievalSettings(Section):
    """Reranking and grounded answers (``store.query.rerank`` / ``answer``, ``vectorsync ask``)."""

    #: Rerank models, in failover order ([models.NAME] with task = "rerank"); empty: keep the search order.
    rerank: list[str] = Field(default_factory=list)
    #: Chat models for answers, in failover order (task = "chat"); empty: the fake chat model.
    answer: list[str] = Field(default_factory=list)
    #: Matches retrieved before reranking.
    candidates: int = Field(default=25, gt=0, le=1000)
    #: Passages kept after reranking and shown to the chat model.
    top: int = Field(default=6, gt=0, le=100)
    #: Characters of each passage a reranker or the chat model reads.
    passage_chars: int = Field(default=2000, gt=0, le=100_000)
