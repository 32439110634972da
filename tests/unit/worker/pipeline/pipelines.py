"""One generation's pipeline for the pipeline's unit tests: a memory collection, fake embeddings that count the
texts they embed, the memory ledger, and the jobs over them (``worker.runtime.context.Jobs``)."""

from __future__ import annotations

from typing import Any

from store.embeddings import Embeddings
from store.settings import Settings
from store.state.ledger import MemoryLedger
from store.vectors.backends import memory_store
from tests.backends import unique_name
from worker.pipeline.chunker import Chunker
from worker.pipeline.core import Pipeline, Recipe
from worker.runtime.context import Jobs
from worker.sources.push import PushSource

__all__ = ["CountingEmbeddings", "make_jobs"]


class CountingEmbeddings(Embeddings):
    """The settings' embeddings, with every text they embed kept in ``texts``."""

    def __init__(self, inner: Embeddings) -> None:
        super().__init__(inner.chain, cache=None)
        self.texts: list[str] = []

    def embed_many_with_models(self, texts: Any, *, reuse: Any = None, scope: str = "") -> Any:
        self.texts.extend(texts)
        return super().embed_many_with_models(texts, reuse=reuse, scope=scope)


def make_jobs(
    ledger: MemoryLedger, *, source: Any = None, chain: Settings | None = None, like: Pipeline | None = None
) -> tuple[Jobs, CountingEmbeddings]:
    """The jobs over a fresh memory collection (``like``'s collection if given); without ``source`` its records
    are pushed; ``chain``: settings whose embedding chain it embeds with (the fake model if None)."""
    settings = chain or Settings.model_validate(
        {"vectors": {"store": "memory", "dimensions": 16}, "embeddings": {"cache_ttl_days": 0}}
    )
    embeddings = CountingEmbeddings(Embeddings.from_settings(settings))
    name = like.name if like else unique_name()
    collection = like.collection if like else memory_store(dimensions=16).get_collection(name, create=True)
    pipeline = Pipeline(
        name=name,
        collection=collection,
        source=source or PushSource(name),
        recipe=Recipe(Chunker(max_tokens=8, overlap=2), embeddings),
        ledger=ledger,
    )
    return Jobs.over(pipeline), embeddings
