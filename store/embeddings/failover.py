"""The failover chain: an ordered list of models, each tried with tenacity before the next.

Per entry, only ``TransientError`` is retried (exponential backoff with full
jitter, at least the server's ``Retry-After``, at most ``max_wait_seconds``
between tries, ``max_attempts`` tries). ``PermanentError`` moves on to the next
entry at once; ``InputError`` and ``ConfigError`` are raised at once. An entry
that ran out of tries or failed permanently cools down for ``cooldown_seconds``:
calls skip it meanwhile. When every entry fails, the error raised is transient
if any entry failed transiently (the task is worth retrying later), else the
last permanent one; when every entry is cooling down, a TransientError whose
``retry_after`` is the time until the first comes back.

Answers are checked here, once for every provider: the wrong number of vectors
is a PermanentError (that endpoint is broken: fail over), vectors of the wrong
size a ConfigError raised at once (the settings name the wrong size).

Built from settings, the chain checks that every entry has ``vectors.dimensions``
and, unless ``embeddings.allow_mixed_models`` is set, the same model name.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt
from tenacity.wait import wait_random_exponential

from store.embeddings.providers import Limits, Provider, build_provider
from store.embeddings.providers.fake import DEFAULT_FAKE_MODEL
from store.embeddings.stats import EmbeddingStats
from store.errors import ConfigError, EmbeddingError, PermanentError, TransientError
from store.settings import EmbeddingSettings, ModelSettings, Settings, default

__all__ = [
    "DEFAULT_ENTRY",
    "ChainPolicy",
    "FailoverChain",
    "check_entries",
    "resolve_entries",
]

log = logging.getLogger(__name__)

#: The entry used when no models are configured: the fake provider, the first-try default.
DEFAULT_ENTRY = DEFAULT_FAKE_MODEL
#: The first backoff step in seconds; each retry may wait up to twice as long (full jitter).
BACKOFF_MULTIPLIER = 0.5


@dataclass(frozen=True, kw_only=True, slots=True)
class ChainPolicy:
    """How hard to try each entry, and how long to skip one that keeps failing."""

    max_attempts: int = default(EmbeddingSettings, "max_attempts")
    max_wait_seconds: float = default(EmbeddingSettings, "max_wait_seconds")
    cooldown_seconds: float = default(EmbeddingSettings, "cooldown_seconds")

    @classmethod
    def from_settings(cls, settings: EmbeddingSettings) -> ChainPolicy:
        return cls(
            max_attempts=settings.max_attempts,
            max_wait_seconds=settings.max_wait_seconds,
            cooldown_seconds=settings.cooldown_seconds,
        )


def _wait_for(policy: ChainPolicy) -> Callable[[RetryCallState], float]:
    """A tenacity wait: full-jitter exponential backoff, at least Retry-After, capped."""
    backoff = wait_random_exponential(multiplier=BACKOFF_MULTIPLIER, max=policy.max_wait_seconds)

    def wait(state: RetryCallState) -> float:
        seconds = backoff(state)
        error = state.outcome.exception() if state.outcome else None
        retry_after = getattr(error, "retry_after", None)
        if retry_after:
            seconds = max(seconds, retry_after)
        return float(min(seconds, policy.max_wait_seconds))

    return wait


class FailoverChain:
    """Embeds a batch with the first entry that works; see the module docstring."""

    def __init__(
        self,
        providers: Sequence[Provider],
        *,
        dimensions: int,
        policy: ChainPolicy = ChainPolicy(),
        stats: EmbeddingStats | None = None,
    ) -> None:
        if not providers:
            raise ConfigError(
                "the embedding chain is empty: name at least one [models.NAME] in embeddings.chain"
            )
        self.providers = list(providers)
        self.dimensions = dimensions
        self.policy = policy
        self.stats = stats if stats is not None else EmbeddingStats()
        self._cool_until: dict[str, float] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings, *, stats: EmbeddingStats | None = None) -> FailoverChain:
        """The chain ``[embeddings] chain`` names, checked; see ``resolve_entries``. Raises ConfigError."""
        entries = resolve_entries(settings)
        check_entries(
            entries,
            dimensions=settings.vectors.dimensions,
            allow_mixed_models=settings.embeddings.allow_mixed_models,
        )
        providers = [build_provider(name, model) for name, model in entries]
        policy = ChainPolicy.from_settings(settings.embeddings)
        return cls(providers, dimensions=settings.vectors.dimensions, policy=policy, stats=stats)

    def __repr__(self) -> str:
        return f"<FailoverChain {[provider.name for provider in self.providers]} {self.dimensions}-d>"

    @property
    def model(self) -> str:
        """The first entry's model name: the one that embeds while it is healthy."""
        return self.providers[0].model

    @property
    def limits(self) -> Limits:
        """Limits every entry accepts, so a batch never needs re-splitting on failover."""
        limits = self.providers[0].limits
        for provider in self.providers[1:]:
            limits = limits.tightest(provider.limits)
        return limits

    def embed_batch(self, texts: list[str]) -> tuple[list[list[float]], str]:
        """One vector per text and the model name that made them all.

        Raises InputError (the text was refused), ConfigError (a model's vectors
        have the wrong size), TransientError or PermanentError when every entry failed.
        """
        failures: list[EmbeddingError] = []
        for provider in self.providers:
            if self._cooling(provider):
                continue
            try:
                return self._with_retries(provider, texts), provider.model
            except (TransientError, PermanentError) as error:
                self._cool_down(provider)
                self.stats.add("failovers", provider.name)
                log.warning("embedding model %r failed, trying the next one: %s", provider.name, error)
                failures.append(error)
        raise self._all_failed(failures)

    def _with_retries(self, provider: Provider, texts: list[str]) -> list[list[float]]:
        retrying = Retrying(
            retry=retry_if_exception_type(TransientError),
            stop=stop_after_attempt(self.policy.max_attempts),
            wait=_wait_for(self.policy),
            before_sleep=lambda state: self.stats.add("retries", provider.name),
            reraise=True,
        )
        result: list[list[float]] = retrying(self._call, provider, texts)
        return result

    def _call(self, provider: Provider, texts: list[str]) -> list[list[float]]:
        self.stats.add("calls", provider.name)
        vectors = provider.embed_batch(texts)
        if len(vectors) != len(texts):
            raise PermanentError(
                f"model {provider.model!r} at {provider.endpoint} returned {len(vectors)} vectors "
                f"for {len(texts)} texts"
            )
        for vector in vectors:
            if len(vector) != self.dimensions:
                raise ConfigError(
                    f"model {provider.model!r} returned {len(vector)}-dimensional vectors; "
                    f"vectors.dimensions is {self.dimensions}: set both to the model's size "
                    f"(models.{provider.name}.dimensions, or send_dimensions = true if the model takes it)"
                )
        return vectors

    def _cooling(self, provider: Provider) -> bool:
        with self._lock:
            return self._cool_until.get(provider.name, 0.0) > time.monotonic()

    def _cool_down(self, provider: Provider) -> None:
        if self.policy.cooldown_seconds > 0:
            with self._lock:
                self._cool_until[provider.name] = time.monotonic() + self.policy.cooldown_seconds

    def _all_failed(self, failures: list[EmbeddingError]) -> EmbeddingError:
        transient = [error for error in failures if isinstance(error, TransientError)]
        if transient:
            return transient[-1]
        if failures:
            return failures[-1]
        with self._lock:
            wait = max(min(self._cool_until.values()) - time.monotonic(), 0.0)
        names = ", ".join(repr(provider.name) for provider in self.providers)
        return TransientError(
            f"every embedding model ({names}) is cooling down after failures; "
            f"the next is tried again in {wait:.1f}s",
            retry_after=wait,
        )


def resolve_entries(settings: Settings) -> list[tuple[str, ModelSettings]]:
    """The ``(name, model)`` entries of ``[embeddings] chain``, in order.

    With no chain and no ``[models]`` at all, one ``fake`` model of ``vectors.dimensions``
    (the first-try default). Raises ConfigError for an empty chain or an unknown name.
    """
    names = settings.embeddings.chain
    if not names and not settings.models:
        default = ModelSettings(
            provider="fake", model=DEFAULT_FAKE_MODEL, dimensions=settings.vectors.dimensions
        )
        return [(DEFAULT_ENTRY, default)]
    if not names:
        configured = ", ".join(repr(name) for name in settings.models)
        raise ConfigError(
            f"embeddings.chain is empty but models are configured ({configured}): "
            f"list the ones to use, in order, e.g. chain = [{next(iter(settings.models))!r}]"
        )
    unknown = [name for name in names if name not in settings.models]
    if unknown:
        known = ", ".join(repr(name) for name in settings.models) or "none"
        raise ConfigError(
            f"embeddings.chain names {unknown[0]!r}, which is not a [models.{unknown[0]}] section "
            f"(configured: {known})"
        )
    if len(set(names)) != len(names):
        raise ConfigError(f"embeddings.chain names a model twice: {names}")
    return [(name, settings.models[name]) for name in names]


def check_entries(
    entries: Sequence[tuple[str, ModelSettings]], *, dimensions: int, allow_mixed_models: bool
) -> None:
    """Raise ConfigError unless every entry makes vectors of one space of ``dimensions``."""
    if not entries:
        raise ConfigError("the embedding chain is empty: name at least one [models.NAME] in embeddings.chain")
    first_name, first = entries[0]
    for name, model in entries[1:]:
        if model.dimensions != first.dimensions:
            raise ConfigError(
                f"models in one chain must have the same dimensions: {first_name!r} ({first.model}) has "
                f"{first.dimensions}, {name!r} ({model.model}) has {model.dimensions}"
            )
        if model.model != first.model and not allow_mixed_models:
            raise ConfigError(
                f"models {first_name!r} ({first.model}) and {name!r} ({model.model}) embed into different "
                "spaces; a chain normally serves one model from several endpoints. To fail over to another "
                "model anyway, set embeddings.allow_mixed_models = true (each chunk records its model)"
            )
    if first.dimensions != dimensions:
        raise ConfigError(
            f"model {first_name!r} ({first.model}) has {first.dimensions} dimensions; vectors.dimensions "
            f"is {dimensions}: make them equal"
        )
