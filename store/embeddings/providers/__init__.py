"""Embedding providers, one module per technology, behind the ``Provider`` seam.

``build_provider`` picks the module named by ``[models.NAME] provider``; the
openai, httpx and sentence-transformers drivers are imported only when a model
uses them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.embeddings.providers.base import DEFAULT_LIMITS, Limits, Provider
from store.embeddings.providers.fake import FakeProvider, hash_embed

if TYPE_CHECKING:
    from store.settings import ModelSettings

__all__ = ["DEFAULT_LIMITS", "FakeProvider", "Limits", "Provider", "build_provider", "hash_embed"]


def build_provider(name: str, settings: ModelSettings) -> Provider:
    """The provider for ``[models.<name>]``. Raises ConfigError when its driver is missing."""
    if settings.provider == "fake":
        return FakeProvider(
            name=name,
            model=settings.model,
            dimensions=settings.dimensions,
            limits=Limits.from_settings(settings),
        )
    if settings.provider == "openai":
        from store.embeddings.providers.openai import OpenAIProvider

        return OpenAIProvider(name=name, settings=settings)
    if settings.provider == "ollama":
        from store.embeddings.providers.ollama import OllamaProvider

        return OllamaProvider(name=name, settings=settings)
    from store.embeddings.providers.local import LocalProvider

    return LocalProvider(name=name, settings=settings)
