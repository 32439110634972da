"""Rerank and chat providers, one module per technology; drivers load only when a model uses them."""

from __future__ import annotations

from store.retrieval.base import Chat, Reranker
from store.retrieval.providers.fake import FakeChat, FakeReranker
from store.settings import ModelSettings

__all__ = ["FakeChat", "FakeReranker", "build_chat", "build_reranker"]


def build_reranker(name: str, settings: ModelSettings) -> Reranker:
    """The reranker of ``[models.NAME]`` (task = "rerank"). Raises ConfigError when its driver is missing."""
    if settings.provider == "fake":
        return FakeReranker(name=name, model=settings.model)
    if settings.provider == "openai":
        from store.retrieval.providers.openai import OpenAIReranker

        return OpenAIReranker(name=name, settings=settings)
    if settings.provider == "http":
        from store.retrieval.providers.http import HttpReranker

        return HttpReranker(name=name, settings=settings)
    from store.retrieval.providers.local import LocalReranker

    return LocalReranker(name=name, settings=settings)


def build_chat(name: str, settings: ModelSettings) -> Chat:
    """The chat model of ``[models.NAME]`` (task = "chat")."""
    if settings.provider == "fake":
        return FakeChat(name=name, model=settings.model)
    from store.retrieval.providers.openai import OpenAIChat

    return OpenAIChat(name=name, settings=settings)
