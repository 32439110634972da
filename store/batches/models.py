"""Which models have a batch lane: the first model of each chain a run embeds with, where it declares
``[models.NAME.batch]`` (a generation's own settings, as it was migrated to, for a generation's run)."""

from __future__ import annotations

from collections.abc import Sequence

from store.errors import ConfigError
from store.settings import ModelSettings, Settings
from store.state.generations.base import Generation, Generations, generation_settings, parse_name

__all__ = ["CAPPED", "checked_lanes", "lane_models"]


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


#: Why a capped run does not go through the lane, and what to do instead.
CAPPED = (
    "a capped run cannot go through the batch lane yet (a cap is checked before each synchronous call; the lane "
    "buys in provider jobs): run it with --batch and no cap, after --plan has shown the lane's cost, or capped "
    "without --batch"
)


def checked_lanes(
    settings: Settings, registry: Generations | None, collection: str, *, capped: bool = False
) -> dict[str, ModelSettings]:
    """``lane_models`` of the generations a write of ``collection`` goes to (``registry``: the aliases), or
    ConfigError naming the fix when a run of it has no lane to go through, or is ``capped`` (its own caps, or its
    collection's budget)."""
    from store.state.generations.routing import writing

    generations = writing(settings, registry, collection)
    declared = settings.collections.get(parse_name(collection)[0])
    budget = declared.budget if declared is not None else None
    if capped or (budget is not None and (budget.max_tokens is not None or budget.max_cost is not None)):
        raise ConfigError(f"--batch: {CAPPED}")
    found = lane_models(settings, generations)
    if found:
        return found
    chains = [generation_settings(settings, g).embeddings.chain for g in generations]
    named = ", ".join(sorted({chain[0] for chain in chains if chain})) or "the built-in fake model"
    raise ConfigError(
        f"--batch: {collection} embeds with {named} first, which has no batch lane: add [models.NAME.batch] for "
        "an OpenAI model (its price and the longest wait a run accepts: docs/batch-lane.md), or run without --batch"
    )
