"""Settings: one TOML file, overridden by ``VECTORSYNC_<SECTION>__<KEY>`` environment variables.

Every section rejects unknown keys, and a bad value fails at load with a
message naming the key, the value and what is allowed. Secrets (the Qdrant
key, provider API keys) come only from the environment.
"""

from __future__ import annotations

import math
import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SecretStr,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from store.errors import ConfigError
from store.settings.budget import BudgetSettings
from store.settings.capture import CaptureSettings
from store.settings.collection_names import check_declared_name
from store.settings.problems import ENV_PREFIX, describe, env_problem
from store.settings.search import SearchSettings
from store.settings.section import Section, redacted_repr_args
from store.settings.source import FIELD_PATTERN, SourceSettings

__all__ = [
    "DEFAULT_BROKER_URL",
    "DEFAULT_CONFIG_PATH",
    "FIELD_PATTERN",
    "BrokerSettings",
    "BudgetSettings",
    "CacheSettings",
    "CaptureSettings",
    "ChunkerSettings",
    "CollectionSettings",
    "EmbeddingSettings",
    "FieldType",
    "FlowerSettings",
    "IndexSettings",
    "LimitSettings",
    "ModelSettings",
    "NetworkSettings",
    "RetrievalSettings",
    "SearchSettings",
    "Settings",
    "SourceSettings",
    "StateSettings",
    "VectorSettings",
    "WorkerSettings",
    "default",
    "load_settings",
]

#: Where settings are read from when neither an argument nor VECTORSYNC_CONFIG names a file.
DEFAULT_CONFIG_PATH = Path("vectorsync.toml")
#: The broker when none is configured: the Redis a development machine runs.
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/0"


class BrokerSettings(Section):
    url: str = DEFAULT_BROKER_URL
    #: Seconds before Redis hands an unacknowledged task to another worker; above worker.time_limit.
    visibility_timeout: int = Field(default=3600, gt=0)
    #: Seconds an enqueued record is coalesced with later enqueues of it (until its task starts).
    coalesce_seconds: int = Field(default=600, ge=0)
    #: Seconds a command to a Redis broker (a publish, an ack) waits for its answer before the connection
    #: counts as lost and is made again; a consumer's wait for tasks is checked every
    #: network.health_check_interval instead.
    socket_timeout: float = Field(default=30, gt=0)
    #: AMQP (RabbitMQ) heartbeat, seconds: a broker silent for two of them is taken as gone (0: off).
    heartbeat: int = Field(default=30, ge=0)


class NetworkSettings(Section):
    """How every connection to PostgreSQL and Redis (the broker's too) notices a peer gone silent: a
    partition drops packets without a refusal, and a connection left to the system's defaults waits for
    hours (``store.settings.network`` sets them on each kind of connection). Keep the time they add up to
    well under ``worker.time_limit``: a task that hits its limit is killed, not retried."""

    #: Seconds to open a connection: libpq's connect_timeout (2 at least), Redis's, the broker's.
    connect_timeout: int = Field(default=10, ge=2)
    #: Seconds a connection may sit idle before TCP keepalive probes start, on both ends of a PostgreSQL
    #: connection (the server's as session settings, so it ends the session, and lets go of its locks,
    #: when the client goes silent) and on Redis connections.
    keepalive_idle: int = Field(default=15, gt=0)
    #: Seconds between keepalive probes.
    keepalive_interval: int = Field(default=5, gt=0)
    #: Unanswered probes after which the connection is dropped: idle 15 + 3 probes of 5 = 30 s by default.
    keepalive_count: int = Field(default=3, gt=0)
    #: Seconds data sent may stay unacknowledged before the connection is dropped (TCP_USER_TIMEOUT), on
    #: PostgreSQL connections (both ends) and Redis ones. 0: the system's, about 15 minutes. At most a day
    #: (the socket option holds milliseconds in 32 bits).
    tcp_user_timeout: float = Field(default=30, ge=0, le=86_400)
    #: Seconds a Redis connection may sit idle before it is checked with a PING before use; also how often
    #: the broker's consumer checks that its waiting connections still answer (0: off).
    health_check_interval: int = Field(default=15, ge=0)


class WorkerSettings(Section):
    #: Hard limit of one task, seconds; a task past it is killed and redelivered.
    time_limit: int = Field(default=1800, gt=0)
    #: Seconds an index build after a bulk load may take, from its start, across the tasks that wait for it in
    #: steps shorter than ``time_limit`` (the build runs on in PostgreSQL): past it, the build is cancelled and
    #: its run ends failed, naming this setting (docs/operations.md#index-builds).
    index_time_limit: int = Field(default=21_600, gt=0)
    #: Record ids per bulk batch task.
    batch_size: int = Field(default=100, gt=0, le=10_000)
    #: Id pages (of ``batch_size``) one fan-out step of a reindex reads before it queues a step of its own for the
    #: rest, behind the batches it sent: the bulk queue holds about this many batches of a run at a time, so
    #: Redis's memory does not grow with the source (docs/operations.md#the-fan-out).
    fanout_pages: int = Field(default=100, gt=0, le=100_000)
    #: Retries of a batch whose provider calls keep failing, before its records go to failures.
    max_retries: int = Field(default=5, ge=0)
    #: Times a task's message may come back after its pool process died under it or was killed at
    #: ``time_limit`` (out of memory, a crash, kill -9), before the task gives up on it: a batch's records go
    #: to failures (its run goes on), a fan-out's or sweep's run ends failed. Counted in the cache's Redis.
    max_redeliveries: int = Field(default=5, ge=1)
    #: First retry delay in seconds; doubles each time.
    retry_delay: float = Field(default=10, ge=0)
    #: Seconds between reconcile sweeps of each collection with a source, run by Celery beat (0: off).
    reconcile_seconds: int = Field(default=3600, ge=0)
    #: Seconds between sampled verifies of each collection, run by Celery beat (0: off); the verdict is
    #: exported as ``vectorsync_drifted_records``.
    verify_seconds: int = Field(default=86_400, ge=0)
    #: Records a sampled verify checks, drawn at random.
    verify_sample: int = Field(default=1000, gt=0)
    #: Prometheus metrics port of a worker (0: off).
    metrics_port: int = Field(default=0, ge=0, le=65535)
    #: Seconds within which 95% of changes should be searchable, from the writer's commit (captured) or the
    #: app's send: the freshness alert's target, exported as ``vectorsync_freshness_target_seconds``.
    freshness_target_seconds: float = Field(default=5.0, gt=0)
    #: Seconds without progress after which ``vectorsync status`` shows a running run stalled whose queue has
    #: consumers (with none it is stalled at once).
    stall_seconds: int = Field(default=300, gt=0)


class LimitSettings(Section):
    """Caps on what one input may hold. Going over one is a ConfigError naming the value, the cap and this
    setting; it is never retried."""

    #: Characters of a record id (PostgreSQL btree index rows hold about 2,700 bytes).
    max_id_chars: int = Field(default=512, gt=0, le=2000)
    #: Levels of nesting in a record's metadata.
    max_metadata_depth: int = Field(default=32, gt=0, le=500)
    #: Chunks one record may make (a 10 MB text makes thousands).
    max_chunks_per_record: int = Field(default=2000, gt=0)
    #: Levels of nesting in a filter ($and, $or, $not).
    max_filter_depth: int = Field(default=16, gt=0, le=200)
    #: Conditions and values in one filter, all $in lists counted.
    max_filter_terms: int = Field(default=1000, gt=0, le=100_000)
    #: Points Qdrant may return for one search whose filter is partly checked in Python.
    max_residual_scan: int = Field(default=100_000, gt=0)


class FlowerSettings(Section):
    #: Where Flower answers, for ``vectorsync doctor`` (None: not checked).
    url: str | None = None


class StateSettings(Section):
    url: str | None = None  # None: the pgvector database (vectors.url)


class CacheSettings(Section):
    url: str | None = None  # None: the broker's Redis


#: Which providers serve which task.
PROVIDERS = {
    "embed": ("openai", "ollama", "local", "fake"),
    "rerank": ("openai", "http", "local", "fake"),
    "chat": ("openai", "fake"),
}


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

    @field_validator("price_per_million_tokens")
    @classmethod
    def _a_price(cls, price: float | None) -> float | None:
        if price is not None and not (price >= 0 and math.isfinite(price)):
            raise ValueError(
                "a price is 0 or more: what the provider charges for a million tokens (e.g. 0.02), "
                "or leave it out to show no cost"
            )
        return price

    @model_validator(mode="after")
    def _provider_serves_task(self) -> ModelSettings:
        if self.provider not in PROVIDERS[self.task]:
            raise ValueError(
                f"provider {self.provider!r} cannot serve task {self.task!r}: use one of "
                f"{', '.join(PROVIDERS[self.task])}"
            )
        if self.quantize and (self.provider != "local" or self.backend != "onnx"):
            raise ValueError("quantize applies only to provider 'local' with backend 'onnx'")
        if self.task == "embed" and not self.dimensions:
            raise ValueError(f"model {self.model!r} embeds, so dimensions is required (the size of its vectors)")
        return self


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


class VectorSettings(Section):
    store: Literal["pgvector", "qdrant", "memory"] = "pgvector"
    url: str | None = None
    key: SecretStr | None = None
    dimensions: int = Field(default=1536, gt=0, le=65536)
    metric: Literal["cosine", "dot", "euclidean"] = "cosine"
    hnsw_m: int = Field(default=16, ge=2, le=100)
    #: 128, not pgvector's 64: at 1,000,000 clustered vectors 64 builds a graph that even ef_search 1000 cannot
    #: search to recall@10 0.95 (docs/benchmarks.md, "HNSW defaults"); 128 reaches 0.96-0.97 at ef_search 200.
    hnsw_ef_construction: int = Field(default=128, ge=4, le=1000)
    ef_search: int = Field(default=200, ge=1, le=1000)
    #: Prefix of the pgvector table that holds a collection.
    table_prefix: str = Field(default="vs_", pattern=r"^[a-z][a-z0-9_]{0,14}$")
    #: Payload fields Qdrant indexes for filtering, besides record_id.
    index_fields: list[str] = Field(default_factory=list)
    #: A filtered pgvector search whose filter matches at most this many rows (and under 5% of the table)
    #: sorts them exactly by distance; a filter matching more uses the HNSW index with iterative scans.
    exact_search_rows: int = Field(default=10_000, ge=0, le=1_000_000)
    #: Parallel workers PostgreSQL may use to build an HNSW index (besides its leader): this machine's cores
    #: less one, a guess that holds where the database runs on a machine of the same size.
    index_build_workers: int = Field(default_factory=lambda: max(0, (os.cpu_count() or 2) - 1), ge=0, le=64)
    #: How pgvector stores and indexes embeddings: "float" as ``vector(d)`` (4 bytes a dimension), "half" as
    #: ``halfvec(d)`` (2 bytes, HNSW with ``halfvec_*_ops``). Above 2000 dimensions the column is halfvec
    #: whatever this says (pgvector's HNSW indexes vector only up to 2000). pgvector only: another store with
    #: "half" is refused. A table keeps the precision it was made with; opening it with the other is refused.
    precision: Literal["float", "half"] = "float"

    @model_validator(mode="after")
    def _half_is_pgvector_only(self) -> VectorSettings:
        if self.precision == "half" and self.store != "pgvector":
            raise ValueError(
                f'precision "half" is a pgvector storage (halfvec); the {self.store} store keeps float vectors: '
                'set vectors.precision = "float", or use vectors.store = "pgvector"'
            )
        return self


class ChunkerSettings(Section):
    max_tokens: int = Field(default=512, gt=0)
    overlap: int = Field(default=64, ge=0)
    markdown: bool = False

    @model_validator(mode="after")
    def _overlap_below_max_tokens(self) -> ChunkerSettings:
        if self.overlap >= self.max_tokens:
            raise ValueError(f"chunker overlap ({self.overlap}) must be below max_tokens ({self.max_tokens})")
        return self


#: Types a declared indexed field may have; a stored value of another type is refused at write.
FieldType = Literal["integer", "float", "keyword", "bool", "datetime"]


class IndexSettings(Section):
    """Metadata fields filtered often: indexed for ranges and equality (pgvector btree, Qdrant payload index)."""

    #: Field (dotted for nested objects) to type, e.g. ``{ owner_id = "integer", created_at = "datetime" }``.
    fields: dict[Annotated[str, StringConstraints(pattern=FIELD_PATTERN, max_length=200)], FieldType] = Field(
        default_factory=dict
    )


class CollectionSettings(Section):
    source: SourceSettings = Field(default_factory=SourceSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    chunker: ChunkerSettings = Field(default_factory=ChunkerSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    #: Metadata fields every search must pin to one value (tenancy: ``["workspace_id"]``); a search without
    #: an equality on each, ANDed at the top, is refused.
    required_filter: list[Annotated[str, StringConstraints(pattern=FIELD_PATTERN, max_length=200)]] = Field(
        default_factory=list
    )
    #: The embedding cache's scope: ``collection``, its vectors found by its own records alone (an erased text
    #: leaves no vector another collection is served); ``shared``, the pool of every collection that says so.
    cache: Literal["collection", "shared"] = "collection"


class Settings(BaseSettings):
    """All of vectorsync's settings; build with ``load_settings``."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True)

    broker: BrokerSettings = Field(default_factory=BrokerSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    capture: CaptureSettings = Field(default_factory=CaptureSettings)
    flower: FlowerSettings = Field(default_factory=FlowerSettings)
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    state: StateSettings = Field(default_factory=StateSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    models: dict[str, ModelSettings] = Field(default_factory=dict)
    embeddings: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    vectors: VectorSettings = Field(default_factory=VectorSettings)
    collections: dict[str, CollectionSettings] = Field(default_factory=dict)

    @field_validator("collections")
    @classmethod
    def _collection_names(cls, value: dict[str, CollectionSettings]) -> dict[str, CollectionSettings]:
        for name in value:
            check_declared_name(name)
        return value

    @model_validator(mode="after")
    def _visibility_above_time_limit(self) -> Settings:
        limit = self.worker.time_limit  # index_time_limit bounds a build, not a task: no message waits that long
        if self.broker.visibility_timeout <= limit:
            raise ValueError(
                f"broker.visibility_timeout ({self.broker.visibility_timeout}) must be above worker.time_limit "
                f"({limit}), or Redis redelivers tasks that are still running"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The TOML file arrives as init kwargs; the environment overrides it.
        return (env_settings, init_settings)

    def __repr__(self) -> str:
        return f"Settings({', '.join(f'{name}={value!r}' for name, value in redacted_repr_args(self))})"

    @property
    def state_url(self) -> str | None:
        return self.state.url or (self.vectors.url if self.vectors.store == "pgvector" else None)

    @property
    def cache_url(self) -> str:
        return self.cache.url or self.broker.url


_SECRET_KEYS = {("vectors", "key")}


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path} is not UTF-8 text (byte {exc.object[exc.start : exc.end]!r} at offset {exc.start}): "
            "save it as UTF-8"
        ) from None
    for section, key in _SECRET_KEYS:
        if isinstance(data.get(section), dict) and key in data[section]:
            env = f"{ENV_PREFIX}{section.upper()}__{key.upper()}"
            raise ConfigError(
                f"{section}.{key} is a secret and is read only from the environment: "
                f"remove it from {path} and set {env}"
            )
    return data


def default(section: type[BaseModel], key: str) -> Any:
    """The default of ``key`` in ``section``: classes take their defaults from here, so each is stated once."""
    field = section.model_fields[key]
    return field.get_default(call_default_factory=True)


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """Read settings from ``path``, else ``$VECTORSYNC_CONFIG``, else ./vectorsync.toml.

    A file named explicitly must exist; the default file is optional. Raises
    ConfigError naming the key, the bad value and what is allowed.
    """
    named = path if path is not None else os.environ.get(f"{ENV_PREFIX}CONFIG")
    file = Path(named) if named else DEFAULT_CONFIG_PATH
    if named and not file.is_file():
        raise ConfigError(f"settings file {str(file)!r} does not exist (VECTORSYNC_CONFIG or --config)")
    data = _read_toml(file) if file.is_file() else {}
    try:
        return Settings(**data)
    except SettingsError as exc:  # a VECTORSYNC_* variable for a list or a table that is not JSON
        raise ConfigError(
            f"{env_problem(str(exc))}: a variable for a list or a table takes JSON, "
            f'e.g. {ENV_PREFIX}EMBEDDINGS__CHAIN=\'["primary", "backup"]\''
        ) from None
    except ValidationError as exc:
        problems = "; ".join(describe(error) for error in exc.errors())
        raise ConfigError(f"bad settings in {file}: {problems}") from None
