"""``[models.NAME]``, ``[embeddings]``, ``[retrieval]``: a model serves the tasks its provider can, prices are
finite and not negative, and a pasted key is never echoed."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from store import ConfigError
from store.settings import Settings, load_settings
from store.settings.models import PROVIDERS, BatchLaneSettings, EmbeddingSettings, ModelSettings, RetrievalSettings


@pytest.fixture(autouse=True)
def clean_env(no_vectorsync_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "vectorsync.toml"
    path.write_text(text)
    return path


PRICED = """
[models.small]
provider = "openai"
model = "text-embedding-3-small"
dimensions = 1536
{price}
"""


def test_a_declared_price_loads_and_none_declared_means_no_price(tmp_path: Path) -> None:
    priced = load_settings(write(tmp_path, PRICED.format(price="price_per_million_tokens = 0.02")))
    assert priced.models["small"].price_per_million_tokens == 0.02
    assert load_settings(write(tmp_path, PRICED.format(price=""))).models["small"].price_per_million_tokens is None
    free = load_settings(write(tmp_path, PRICED.format(price="price_per_million_tokens = 0")))
    assert free.models["small"].price_per_million_tokens == 0


def test_a_negative_price_names_the_value_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(write(tmp_path, PRICED.format(price="price_per_million_tokens = -0.02")))
    assert str(caught.value) == (
        f"bad settings in {tmp_path / 'vectorsync.toml'}: setting models.small.price_per_million_tokens = -0.02 "
        "is not allowed: a price is 0 or more: what the provider charges for a million tokens (e.g. 0.02), "
        "or leave it out to show no cost (env VECTORSYNC_MODELS__SMALL__PRICE_PER_MILLION_TOKENS)"
    )


@pytest.mark.parametrize("value", ["nan", "inf", '"free"'])
def test_a_price_that_is_not_a_finite_number_is_refused_with_its_value(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=r"models\.small\.price_per_million_tokens = .+ is not allowed"):
        load_settings(write(tmp_path, PRICED.format(price=f"price_per_million_tokens = {value}")))


def test_a_key_like_setting_is_still_hidden_in_messages(tmp_path: Path) -> None:
    text = PRICED.format(price='api_key_env = "sk-not-a-variable-name"')
    with pytest.raises(ConfigError) as caught:
        load_settings(write(tmp_path, text))
    assert "sk-not" not in str(caught.value)


def test_a_misspelled_provider_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="setting models.m.provider = 'openia' is not allowed"):
        load_settings(write(tmp_path, '[models.m]\nprovider = "openia"\nmodel = "x"\ndimensions = 8\n'))


@pytest.mark.parametrize(("task", "provider"), [("rerank", "ollama"), ("chat", "local"), ("embed", "http")])
def test_a_provider_that_cannot_serve_the_task_is_refused_with_those_that_can(task: str, provider: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ModelSettings(task=task, provider=provider, model="m", dimensions=4)  # type: ignore[arg-type]
    assert f"provider {provider!r} cannot serve task {task!r}: use one of {', '.join(PROVIDERS[task])}" in str(
        caught.value
    )


def test_an_embedding_model_needs_its_dimensions_and_a_reranker_does_not() -> None:
    with pytest.raises(ValidationError, match="model 'm' embeds, so dimensions is required"):
        ModelSettings(provider="fake", model="m")
    assert ModelSettings(task="rerank", provider="fake", model="m").dimensions == 0


def test_quantize_is_for_local_onnx_models_only() -> None:
    assert ModelSettings(provider="local", model="m", dimensions=4, quantize=True).quantize
    for other in ({"provider": "openai"}, {"provider": "local", "backend": "torch"}):
        with pytest.raises(ValidationError, match="quantize applies only to provider 'local' with backend 'onnx'"):
            ModelSettings.model_validate({"model": "m", "dimensions": 4, "quantize": True, **other})


def test_the_chains_are_empty_until_named_and_their_sizes_are_bounded() -> None:
    assert (EmbeddingSettings().chain, RetrievalSettings().rerank, RetrievalSettings().answer) == ([], [], [])
    for section, bad in ((EmbeddingSettings, {"batch_size": 2049}), (RetrievalSettings, {"top": 0})):
        with pytest.raises(ValidationError):
            section.model_validate(bad)


def test_a_model_s_batch_lane_has_safe_defaults_and_refuses_a_bad_price() -> None:
    lane = BatchLaneSettings()
    assert (lane.max_wait_hours, lane.min_inputs, lane.on_failure, lane.max_requests) == (24, 1000, "chain", 50_000)
    with pytest.raises(ValidationError, match="a price is 0 or more"):
        BatchLaneSettings(price_per_million_tokens=-1)
    with pytest.raises(ValidationError):
        BatchLaneSettings(max_wait_hours=48)  # past OpenAI's 24 h window


def test_a_collection_whose_runs_go_through_the_lane_needs_one() -> None:
    small = {"provider": "openai", "model": "text-embedding-3-small", "dimensions": 8, "base_url": "http://x/v1"}
    with pytest.raises(ValidationError, match=r"collections.notes.lane is \"batch\", but the chain's first model"):
        Settings(models={"small": small}, embeddings={"chain": ["small"]}, collections={"notes": {"lane": "batch"}})
    laned = Settings(
        models={"small": small | {"batch": {}}},
        embeddings={"chain": ["small"]},
        collections={"notes": {"lane": "batch"}},
    )
    assert laned.collections["notes"].lane == "batch"
    with pytest.raises(ValidationError, match="a capped run cannot go through the batch lane yet"):
        Settings(
            models={"small": small | {"batch": {}}},
            embeddings={"chain": ["small"]},
            collections={"notes": {"lane": "batch", "budget": {"max_cost": 1.0}}},
        )
