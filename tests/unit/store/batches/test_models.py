"""Which models have a batch lane, and the refusal of ``--batch`` where none has, naming the fix."""

from __future__ import annotations

import pytest

from store.batches.models import checked_lanes, lane_models
from store.errors import ConfigError
from store.settings import Settings
from store.state.generations.base import Generation


def settings(batch: bool) -> Settings:
    small = {"provider": "openai", "model": "text-embedding-3-small", "dimensions": 8, "base_url": "http://x/v1"}
    if batch:
        small["batch"] = {"price_per_million_tokens": 0.01}
    backup = {"provider": "fake", "model": "fake", "dimensions": 8}
    return Settings(models={"small": small, "backup": backup}, embeddings={"chain": ["small", "backup"]})


def test_the_chain_s_first_model_with_a_lane_is_found() -> None:
    found = lane_models(settings(True), [Generation("notes", 1, ("small", "backup"))])
    assert list(found) == ["small"] and found["small"].batch is not None


def test_batch_is_refused_where_the_first_model_has_no_lane() -> None:
    with pytest.raises(ConfigError) as refused:
        checked_lanes(settings(False), None, "notes")
    assert "small first, which has no batch lane" in str(refused.value) and "[models.NAME.batch]" in str(refused.value)


def test_only_an_openai_embedding_model_may_have_a_lane() -> None:
    with pytest.raises(ValueError, match="only an embedding model of provider 'openai' has one"):
        Settings(models={"m": {"provider": "fake", "model": "m", "dimensions": 4, "batch": {}}})


def test_batch_is_refused_for_a_capped_run_and_a_budgeted_collection() -> None:
    laned = settings(True)
    with pytest.raises(ConfigError, match="a capped run cannot go through the batch lane yet"):
        checked_lanes(laned, None, "notes", capped=True)
    budgeted = Settings.model_validate(laned.model_dump() | {"collections": {"notes": {"budget": {"max_tokens": 10}}}})
    with pytest.raises(ConfigError, match="a capped run cannot go through the batch lane yet"):
        checked_lanes(budgeted, None, "notes")
    assert list(checked_lanes(laned, None, "notes")) == ["small"]
