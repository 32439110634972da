"""Which models have a batch lane: the first model of each chain a run embeds with, where it declares
``[models.NAME.batch]`` (a generation's own settings, as it was migrated to, for a generation's run)."""

from __future__ import annotations

from collections.abc import Sequence

from store.errors import ConfigError
from store.settings import ModelSettings, Settings
from store.state.generations.base import Generation, generation_settings

__all__ = ["checked_lanes", "lane_models"]


def lane_models(settings: Settings, generations: Sequence[Generation]) -> dict[str, ModelSettings]:
    """The first model of each generation's chain that has a batch lane, by its ``[models.NAME]`` name."""
    found: dict[str, ModelSettings] = {}
    for generation in generations:
        embedded = generation_settings(settings, generation)
        chain = embedded.embeddings.chain
        first = embedded.models.get(chain[0]) if chain else None
        if first is not None and first.batch is not None:
            found[chain[0]] = first
    return found


def checked_lanes(settings: Settings, generations: Sequence[Generation], collection: str) -> dict[str, ModelSettings]:
    """``lane_models``, or ConfigError naming the fix when a run of ``collection`` has no lane to go through."""
    found = lane_models(settings, generations)
    if found:
        return found
    chains = [generation_settings(settings, g).embeddings.chain for g in generations]
    named = ", ".join(sorted({chain[0] for chain in chains if chain})) or "the built-in fake model"
    raise ConfigError(
        f"--batch: {collection} embeds with {named} first, which has no batch lane: add [models.NAME.batch] for "
        "an OpenAI model (its price and the longest wait a run accepts: docs/batch-lane.md), or run without --batch"
    )
