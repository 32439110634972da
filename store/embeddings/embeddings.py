"""``Embeddings``: texts in, vectors out, through the cache and then the failover chain.

``embed_many`` looks every distinct text up in the cache (one MGET), sends the
misses through the chain in token-aware batches (several at once; under a run's
cap, reserved together before the first is sent), writes each call's vectors
back as it answers (one pipeline) and returns the vectors in input order, each an
``Embedding`` (float32, with the model that made it, which every chunk
records). The cache is read under the first entry's model and written under
the model that made each vector, so a failover model's vectors never answer
for another.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from store.calls import caps
from store.calls.accounting import EmbeddingStats
from store.contract import REDIS_SCHEMES
from store.embeddings.batching import plan_batches, run_batches
from store.embeddings.cache import EmbeddingCache
from store.embeddings.chain import FailoverChain
from store.embeddings.embedding import Embedding
from store.errors import ConfigError
from store.settings import EmbeddingSettings, Settings, default

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_BATCH_SIZE", "DEFAULT_PARALLELISM", "Embedding", "Embeddings", "Reuse"]

#: Texts per provider call unless told otherwise.
DEFAULT_BATCH_SIZE: int = default(EmbeddingSettings, "batch_size")
#: Provider calls in flight per ``embed_many`` unless told otherwise.
DEFAULT_PARALLELISM: int = default(EmbeddingSettings, "parallelism")
SECONDS_PER_DAY = 86_400


#: Given texts the cache lacks, the vectors of ``Embeddings.space`` already stored for some of them, by text.
Reuse = Callable[[list[str]], Mapping[str, Sequence[float]]]


class Embeddings:
    """The embedding facade; build with ``Embeddings.from_settings``. Thread-safe."""

    def __init__(
        self,
        chain: FailoverChain,
        *,
        cache: EmbeddingCache | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        parallelism: int = DEFAULT_PARALLELISM,
    ) -> None:
        self.chain = chain
        self.cache = cache
        self.batch_size = batch_size
        self.parallelism = parallelism

    @classmethod
    def from_settings(cls, settings: Settings) -> Embeddings:
        """The chain of ``[embeddings] chain`` behind the Redis cache at ``[cache] url``.

        With no models configured at all, one ``fake`` model of ``vectors.dimensions``
        (the first-try default, no network). ``cache_ttl_days = 0`` turns the cache off
        and nothing connects to Redis. Raises ConfigError for a bad chain.
        """
        stats = EmbeddingStats()
        chain = FailoverChain.from_settings(settings, stats=stats)
        ttl_days = settings.embeddings.cache_ttl_days
        cache = None
        if ttl_days > 0 and settings.cache_url.startswith(REDIS_SCHEMES):
            cache = EmbeddingCache.from_url(
                settings.cache_url, ttl_seconds=ttl_days * SECONDS_PER_DAY, network=settings.network
            )
        elif ttl_days > 0:
            log.warning(
                "embedding cache off: cache.url %r is not a Redis URL (set [cache] url to a Redis)",
                settings.cache_url.split("://")[0] + "://...",
            )
        return cls(
            chain,
            cache=cache,
            batch_size=settings.embeddings.batch_size,
            parallelism=settings.embeddings.parallelism,
        )

    def __repr__(self) -> str:
        return f"<Embeddings {self.space!r} {self.dimensions}-d cache={'on' if self.cache else 'off'}>"

    @property
    def space(self) -> str:
        """What the vectors made while the chain's first entry is healthy are cached and recorded under: its
        model's name, with the base_url when one is set (``store.embeddings.chain.vector_space``)."""
        return self.chain.space

    @property
    def dimensions(self) -> int:
        return self.chain.dimensions

    @property
    def stats(self) -> EmbeddingStats:
        """Provider calls, retries, failovers per entry; cache hits and misses."""
        return self.chain.stats

    def embed(self, text: str) -> Embedding:
        """The ``Embedding`` of one text. Raises what ``embed_many`` raises."""
        return self.embed_many([text])[0]

    def embed_many(self, texts: Sequence[str], *, reuse: Reuse | None = None, scope: str = "") -> list[Embedding]:
        """One ``Embedding`` per text, in input order; a repeated text is embedded once. ``reuse``: where the
        vectors of ``space`` already stored for some texts are found, asked for the texts the cache lacks.
        ``scope``: the cache's scope, a collection's name (its vectors found by it alone), "" the shared pool.

        Raises ConfigError (not a list of strings; a model of the wrong size), InputError
        (a text over the token limit or refused by the provider), TransientError or
        PermanentError (every model in the chain failed).
        """
        return self.embed_many_with_models(texts, reuse=reuse, scope=scope)

    def embed_many_with_models(
        self, texts: Sequence[str], *, reuse: Reuse | None = None, scope: str = ""
    ) -> list[Embedding]:
        """``embed_many``, by its older name (each ``Embedding`` carries its model)."""
        unique = list(dict.fromkeys(_check_texts(texts)))
        found = self._known(unique, reuse, scope=scope)
        misses = [text for text in unique if text not in found]
        if misses:
            found.update(self._from_chain(misses, scope=scope))
        return [found[text] for text in texts]

    @property
    def call_size(self) -> int:
        """The most texts one provider call takes: ``batch_size``, or fewer when the first model says so."""
        return max(1, min(self.batch_size, self.chain.limits.max_inputs))

    def uncached(self, texts: Sequence[str], *, reuse: Reuse | None = None, scope: str = "") -> list[str]:
        """The distinct texts neither the cache (in ``scope``) nor ``reuse`` holds: what embedding costs."""
        unique = list(dict.fromkeys(_check_texts(texts)))
        found = self._known(unique, reuse, count=False, scope=scope)
        return [text for text in unique if text not in found]

    def embed_whole_calls(
        self, texts: Sequence[str], *, reuse: Reuse | None = None, scope: str = ""
    ) -> tuple[dict[str, Embedding], list[str]]:
        """Embed ``texts`` in whole provider calls only: the cache and ``reuse`` first, then every call that is
        full; the texts of a last, partly filled call come back unembedded, for a later call to fill up. Returns
        the ``Embedding`` of each text embedded (or found) and the texts left. Raises what ``embed_many``
        raises."""
        unique = list(dict.fromkeys(_check_texts(texts)))
        found = self._known(unique, reuse, scope=scope)
        misses = [text for text in unique if text not in found]
        batches = plan_batches(
            misses, batch_size=self.batch_size, limits=self.chain.limits, model=self.chain.providers[0].model
        )
        left: list[str] = []
        if batches and len(batches[-1]) < self.call_size:
            left = [misses[index] for index in batches.pop()]
        if batches:
            found.update(self._from_chain(misses[: batches[-1].stop], batches=batches, scope=scope))
        return found, left

    def close(self) -> None:
        """Close the cache's connections and the providers' clients."""
        if self.cache is not None:
            self.cache.close()
        for provider in self.chain.providers:
            close = getattr(provider, "close", None)
            if close is not None:
                close()

    def _known(
        self, texts: list[str], reuse: Reuse | None, *, count: bool = True, scope: str = ""
    ) -> dict[str, Embedding]:
        """What need not be bought: the cache's vectors, then those ``reuse`` finds stored for the rest (each of
        ``dimensions``). Those are not cached: a store may keep a vector rounded (halfvec) or normalised (Qdrant's
        cosine), right for its own collection, not for another's."""
        found = self._from_cache(texts, count=count, scope=scope)
        missing = [text for text in texts if text not in found] if reuse is not None else []
        if reuse is None or not missing:
            return found
        wanted = set(missing)
        stored = {
            text: Embedding(list(vector), self.space)
            for text, vector in reuse(missing).items()
            if text in wanted and len(vector) == self.dimensions
        }
        if stored and count:
            self.stats.add("reused", amount=len(stored))
        return found | stored

    def _from_cache(self, texts: list[str], *, count: bool = True, scope: str = "") -> dict[str, Embedding]:
        if self.cache is None:
            return {}
        vectors = self.cache.get_many(self.space, self.dimensions, texts, scope=scope)
        found = {text: Embedding(vector, self.space) for text, vector in zip(texts, vectors, strict=True) if vector}
        if count:
            self.stats.add("cache_hits", amount=len(found))
            self.stats.add("cache_misses", amount=len(texts) - len(found))
        return found

    def _from_chain(
        self, texts: list[str], *, batches: list[range] | None = None, scope: str = ""
    ) -> dict[str, Embedding]:
        """Embed ``texts`` in provider calls (``batches`` of their indexes), each call's vectors cached as soon as
        it answers: when a later call fails, what was bought stays bought, and the retry finds it in the cache
        instead of paying for it again. Under a run's cap the calls are all reserved before the first is sent
        (``store.calls.caps.prepaid``): a batch that meets the cap buys none of them, so a pause never leaves
        bought vectors for its resumed run to buy again, even with the cache off (issue 50)."""
        if batches is None:
            batches = plan_batches(
                texts, batch_size=self.batch_size, limits=self.chain.limits, model=self.chain.providers[0].model
            )

        def embed(batch: range) -> list[Embedding]:
            sent = [texts[index] for index in batch]
            vectors, model = self.chain.embed_batch(sent)
            made = [Embedding(vector, model) for vector in vectors]
            self._to_cache(dict(zip(sent, made, strict=True)), scope)
            return made

        with caps.prepaid(self.chain.meter, texts):
            embeddings = run_batches(batches, embed, parallelism=self.parallelism)
        return dict(zip(texts, embeddings, strict=True))

    def _to_cache(self, made: dict[str, Embedding], scope: str = "") -> None:
        if self.cache is None:
            return
        # Under the model that made each vector: a failover model's vectors never answer for another.
        by_model: dict[str, list[tuple[str, Embedding]]] = {}
        for text, embedding in made.items():
            by_model.setdefault(embedding.model, []).append((text, embedding))
        for model, items in by_model.items():
            self.cache.put_many(model, self.dimensions, items, scope=scope)


def _check_texts(texts: Sequence[str]) -> Sequence[str]:
    if isinstance(texts, str | bytes):
        raise ConfigError("embed_many takes a list of strings, not a single string (use embed for one)")
    for text in texts:
        if not isinstance(text, str):
            raise ConfigError(f"texts to embed must be strings, got {type(text).__name__}")
    return texts
