"""The embedding chain: an ordered list of embedding models behind ``store.calls.failover``.

Retries, failover, cool-downs and shared rate limits are
``store.calls.failover.Failover``'s. Answers are checked here, once for every
provider: the wrong number of vectors is a PermanentError (that endpoint is
broken: fail over), vectors of the wrong size a ConfigError raised at once
(the settings name the wrong size).

Built from settings, the chain checks that every entry has ``vectors.dimensions``
and, unless ``embeddings.allow_mixed_models`` is set, the same model name.

Vectors are cached and recorded under their entry's *space*, what determines them
(``vector_space``): the model's name, with its base_url when one is set, or the
entry's ``weights``. Entries of one chain with the first's model name are its
replicas and share its space: a chain serves one model from several endpoints.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence

from store.calls import accounting, caps, spend
from store.calls.accounting import EmbeddingStats
from store.calls.failover import DEFAULT_POLICY, ChainPolicy, Failover, named_entries
from store.calls.ratelimit import Limiter, rate_limiters
from store.calls.spend import UNMETERED, Meter
from store.calls.tokens import estimate_tokens
from store.embeddings.providers import Limits, Provider, build_provider
from store.embeddings.providers.base import Vectors
from store.embeddings.providers.fake import DEFAULT_FAKE_MODEL
from store.errors import ConfigError, PermanentError
from store.settings import ModelSettings, Settings
from store.settings.urls import redact_url

__all__ = [
    "DEFAULT_ENTRY",
    "ChainPolicy",
    "FailoverChain",
    "check_entries",
    "resolve_entries",
    "space_model",
    "vector_space",
]

log = logging.getLogger(__name__)

#: The entry used when no models are configured: the fake provider, the first-try default.
DEFAULT_ENTRY = DEFAULT_FAKE_MODEL


class FailoverChain:
    """Embeds a batch with the first entry that works; see the module docstring."""

    def __init__(
        self,
        providers: Sequence[Provider],
        *,
        dimensions: int,
        policy: ChainPolicy = DEFAULT_POLICY,
        stats: EmbeddingStats | None = None,
        limiters: Mapping[str, Limiter] | None = None,
        spaces: Mapping[str, str] | None = None,
    ) -> None:
        self._failover = Failover(providers, policy=policy, stats=stats, limiters=limiters)
        self.providers = list(providers)
        #: Each entry's space by provider name (``vector_space``); the model's name when not given.
        self.spaces = {provider.name: (spaces or {}).get(provider.name, provider.model) for provider in providers}
        self.dimensions = dimensions
        self.policy = policy
        self.stats = self._failover.stats
        #: How each entry's calls are counted and priced, by provider name (``from_settings`` fills it from the
        #: settings); an entry missing here counts with the estimate, at no price.
        self.meters: dict[str, Meter] = {}

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
        first = vector_space(entries[0][1], providers[0].model)
        spaces = {
            provider.name: first
            if model.weights is None and provider.model == providers[0].model
            else vector_space(model, provider.model)
            for (_, model), provider in zip(entries, providers, strict=True)
        }
        policy = ChainPolicy.from_settings(settings.embeddings)
        limiters = rate_limiters(
            settings.cache_url, entries, max_pause=policy.max_wait_seconds, network=settings.network
        )
        chain = cls(
            providers,
            dimensions=settings.vectors.dimensions,
            policy=policy,
            stats=stats,
            limiters=limiters,
            spaces=spaces,
        )
        chain.meters = {provider.name: Meter.of(model) for (_, model), provider in zip(entries, providers, strict=True)}
        return chain

    def __repr__(self) -> str:
        return f"<FailoverChain {[provider.name for provider in self.providers]} {self.dimensions}-d>"

    @property
    def space(self) -> str:
        """The first entry's space (``vector_space``): what the vectors it makes while healthy are under."""
        return self.spaces[self.providers[0].name]

    @property
    def meter(self) -> Meter:
        """How a call is counted against a run's budget before it is sent: as the first entry counts and prices."""
        return next(iter(self.meters.values()), UNMETERED)

    @property
    def limits(self) -> Limits:
        """Limits every entry accepts, so a batch never needs re-splitting on failover."""
        limits = self.providers[0].limits
        for provider in self.providers[1:]:
            limits = limits.tightest(provider.limits)
        return limits

    def embed_batch(self, texts: list[str]) -> tuple[list[list[float]], str]:
        """One vector per text and the space of the entry that made them all (``vector_space``).

        Raises BudgetExceeded (the call would pass its run's cap: it is not sent), InputError (the text was
        refused), ConfigError (a model's vectors have the wrong size), TransientError or PermanentError when
        every entry failed.
        """
        tokens = sum(estimate_tokens(text) for text in texts)
        with caps.reserved(self.meter, texts):
            vectors, provider = self._failover.run(lambda provider: self._call(provider, texts), tokens=tokens)
        return vectors, self.spaces[provider.name]

    def _call(self, provider: Provider, texts: list[str]) -> list[list[float]]:
        vectors = provider.embed_batch(texts)
        self._count(provider, texts, vectors)
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
            if not all(math.isfinite(x) for x in vector):
                # The endpoint is broken, not the text: fail over, and never let it reach the cache.
                raise PermanentError(
                    f"model {provider.model!r} at {provider.endpoint} returned a vector with NaN or infinite values"
                )
        return vectors

    def _count(self, provider: Provider, texts: list[str], vectors: list[list[float]]) -> None:
        """Count a call as its provider counted it (``Vectors.tokens``), else as its model's tokenizer or the
        estimate does: in Prometheus, and in the spend of the batch it is made for (``store.calls.spend``)."""
        reported = vectors.tokens if isinstance(vectors, Vectors) else None
        tokens, counted_by, cost = self.meters.get(provider.name, UNMETERED).measure(texts, reported)
        accounting.record("embed", provider.model, tokens=tokens, cost=cost)
        spend.add(provider.model, tokens=tokens, cost=cost, counted_by=counted_by)


def vector_space(model: ModelSettings, name: str) -> str:
    """What the vectors of ``model`` (whose provider calls itself ``name``) are cached and recorded under:
    its ``weights`` when set; else ``name``, with ``@`` and the base_url (no credentials) when one is set."""
    if model.weights:
        return model.weights
    return f"{name}@{redact_url(model.base_url)}" if model.base_url else name


def space_model(space: str) -> str:
    """The model name in a recorded space (``vector_space``, read back): without an ``@`` base_url or an int8
    local model's ``+int8``. A space named by ``weights`` comes back as it is."""
    return re.sub(r"@[a-z][a-z0-9+.-]*://.*$", "", space).split("+")[0]


def resolve_entries(settings: Settings) -> list[tuple[str, ModelSettings]]:
    """The ``(name, model)`` entries of ``[embeddings] chain``, in order.

    With no chain and no embedding model configured at all, one ``fake`` model of
    ``vectors.dimensions`` (the first-try default). Raises ConfigError for an empty
    chain, an unknown name, or a model that does not embed.
    """
    names = settings.embeddings.chain
    embedders = [name for name, model in settings.models.items() if model.task == "embed"]
    if not names and not embedders:
        default = ModelSettings(provider="fake", model=DEFAULT_FAKE_MODEL, dimensions=settings.vectors.dimensions)
        return [(DEFAULT_ENTRY, default)]
    if not names:
        raise ConfigError(
            f"embeddings.chain is empty but models are configured ({', '.join(map(repr, embedders))}): "
            f"list the ones to use, in order, e.g. chain = [{embedders[0]!r}]"
        )
    return named_entries(settings, names, task="embed", setting="embeddings.chain")


def check_entries(entries: Sequence[tuple[str, ModelSettings]], *, dimensions: int, allow_mixed_models: bool) -> None:
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
