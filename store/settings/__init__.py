"""Settings: one TOML file, overridden by ``VECTORSYNC_<SECTION>__<KEY>`` environment variables.

Every section rejects unknown keys, and a bad value fails at load with a
message naming the key, the value and what is allowed. Secrets (the Qdrant
key, provider API keys) come only from the environment. Each section is declared in the module named for
it; this package's face is ``Settings``, ``load_settings`` and every section.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from store.errors import ConfigError
from store.settings.budget import BudgetSettings
from store.settings.capture import CaptureSettings
from store.settings.collection import ChunkerSettings, CollectionSettings, FieldType, IndexSettings
from store.settings.collection_names import check_declared_name
from store.settings.limits import LimitSettings
from store.settings.models import BatchLaneSettings, EmbeddingSettings, ModelSettings, RetrievalSettings
from store.settings.network import NetworkSettings
from store.settings.problems import ENV_PREFIX, describe, env_problem
from store.settings.search import SearchSettings
from store.settings.section import redacted_repr_args
from store.settings.services import (
    DEFAULT_BROKER_URL,
    BrokerSettings,
    CacheSettings,
    FlowerSettings,
    StateSettings,
)
from store.settings.source import FIELD_PATTERN, SourceSettings
from store.settings.vectors import VectorSettings
from store.settings.worker import WorkerSettings

__all__ = [
    "DEFAULT_BROKER_URL",
    "DEFAULT_CONFIG_PATH",
    "FIELD_PATTERN",
    "BatchLaneSettings",
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

    @model_validator(mode="after")
    def _lanes_declared(self) -> Settings:
        first = self.embeddings.chain[0] if self.embeddings.chain else None
        model = self.models.get(first) if first is not None else None
        for name, collection in self.collections.items():
            capped = collection.budget.max_tokens is not None or collection.budget.max_cost is not None
            if collection.lane == "batch" and capped:
                raise ValueError(
                    f'collections.{name}.lane is "batch" and its budget caps its runs: a capped run cannot go '
                    'through the batch lane yet; remove the budget, or set lane = "sync"'
                )
            if collection.lane == "batch" and (model is None or model.batch is None):
                raise ValueError(
                    f'collections.{name}.lane is "batch", but the chain\'s first model ({first or "none"}) has no '
                    f'batch lane: add [models.{first or "NAME"}.batch], or set lane = "sync"'
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
