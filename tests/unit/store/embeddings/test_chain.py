"""The embedding chain: its entries checked when it is built (sizes, mixed models, names), what its vectors are
recorded under (spaces), answers of the wrong size or count (the failover itself: calls/test_failover.py)."""

from __future__ import annotations

from typing import Any

import pytest

from store.embeddings.chain import FailoverChain, check_entries, resolve_entries, space_model, vector_space
from store.errors import ConfigError
from store.settings import ModelSettings, Settings
from tests.fake_openai import FakeOpenAI, settings_for


def chain_of(*servers: FakeOpenAI, **options: Any) -> FailoverChain:
    return FailoverChain.from_settings(settings_for(*servers, **options))


def model(name: str = "text-embedding-3-small", dimensions: int = 8) -> ModelSettings:
    return ModelSettings(provider="openai", model=name, dimensions=dimensions)


# -- building -------------------------------------------------------------------------------


def test_entries_of_different_sizes_are_refused() -> None:
    entries = [("primary", model()), ("backup", model(dimensions=16))]
    with pytest.raises(ConfigError) as raised:
        check_entries(entries, dimensions=8, allow_mixed_models=True)
    assert str(raised.value) == (
        "models in one chain must have the same dimensions: 'primary' (text-embedding-3-small) has 8, "
        "'backup' (text-embedding-3-small) has 16"
    )


def test_different_models_need_the_opt_in() -> None:
    entries = [("primary", model()), ("backup", model("mistral-embed"))]
    with pytest.raises(ConfigError, match=r"set embeddings.allow_mixed_models = true"):
        check_entries(entries, dimensions=8, allow_mixed_models=False)
    check_entries(entries, dimensions=8, allow_mixed_models=True)


def test_entry_size_must_match_the_vectors() -> None:
    with pytest.raises(ConfigError) as raised:
        check_entries([("primary", model(dimensions=16))], dimensions=8, allow_mixed_models=False)
    assert str(raised.value) == (
        "model 'primary' (text-embedding-3-small) has 16 dimensions; vectors.dimensions is 8: make them equal"
    )


def test_unknown_or_missing_chain_names_are_config_errors() -> None:
    unknown = Settings.model_validate(
        {"models": {"primary": model().model_dump()}, "embeddings": {"chain": ["primary", "backup"]}}
    )
    with pytest.raises(ConfigError) as raised:
        resolve_entries(unknown)
    assert str(raised.value) == (
        "embeddings.chain names 'backup', which is not a [models.backup] section (configured: 'primary')"
    )
    empty = Settings.model_validate({"models": {"primary": model().model_dump()}})
    with pytest.raises(ConfigError, match=r"embeddings.chain is empty .* chain = \['primary'\]"):
        resolve_entries(empty)
    with pytest.raises(ConfigError, match="the embedding chain is empty"):
        FailoverChain([], dimensions=8)


def test_no_models_at_all_is_the_fake_default() -> None:
    [(name, entry)] = resolve_entries(Settings.model_validate({"vectors": {"dimensions": 32}}))
    assert (name, entry.provider, entry.model, entry.dimensions) == ("fake", "fake", "fake", 32)


# -- retries --------------------------------------------------------------------------------


# -- failover -------------------------------------------------------------------------------


def test_mixed_models_say_which_model_made_the_vectors(primary: FakeOpenAI, backup: FakeOpenAI) -> None:
    primary.push(status=403)
    chain = chain_of(primary, backup, models=["model-a", "model-b"], allow_mixed_models=True)
    assert chain.embed_batch(["alpha"])[1] == f"model-b@{backup.url}"
    assert chain.space == f"model-a@{primary.url}"


# -- checking answers -----------------------------------------------------------------------


def test_vectors_of_the_wrong_size_are_a_config_error(primary: FakeOpenAI, backup: FakeOpenAI) -> None:
    primary.push(dimensions=5)
    chain = chain_of(primary, backup)
    with pytest.raises(ConfigError) as raised:
        chain.embed_batch(["alpha"])
    assert str(raised.value).startswith(
        "model 'text-embedding-test' returned 5-dimensional vectors; vectors.dimensions is 8"
    )
    assert (primary.calls, backup.calls) == (1, 0)


def test_a_wrong_count_fails_over(primary: FakeOpenAI, backup: FakeOpenAI) -> None:
    primary.push(drop=1)
    chain = chain_of(primary, backup)
    vectors, _ = chain.embed_batch(["alpha", "beta"])
    assert len(vectors) == 2
    assert (primary.calls, backup.calls) == (1, 1)


# -- vector spaces --------------------------------------------------------------------------


def test_a_vector_space_is_the_model_at_its_base_url_or_the_weights_named() -> None:
    assert vector_space(model(), "text-embedding-3-small") == "text-embedding-3-small"
    at = ModelSettings(provider="openai", model="e5", dimensions=8, base_url="https://user:pw@gpu.example/v1/")
    assert vector_space(at, "e5") == "e5@https://gpu.example/v1"  # never the credentials
    named = ModelSettings(
        provider="openai", model="e5", dimensions=8, base_url="https://gpu.example/v1", weights="e5-large-v2"
    )
    assert vector_space(named, "e5") == "e5-large-v2"


@pytest.mark.parametrize(
    ("space", "model"),
    [
        ("text-embedding-3-small", "text-embedding-3-small"),
        ("e5@https://gpu.example/v1", "e5"),
        ("all-MiniLM-L6-v2+int8", "all-MiniLM-L6-v2"),
        ("e5-large-v2", "e5-large-v2"),
    ],
)
def test_a_recorded_space_reads_back_as_its_model_name(space: str, model: str) -> None:
    assert space_model(space) == model


def test_replicas_in_one_chain_share_the_first_entry_s_space(primary: FakeOpenAI, backup: FakeOpenAI) -> None:
    """Entries with the first's model name serve the same model from other endpoints (the chain's rule), so a
    failover to one writes vectors the first entry's records can keep."""
    primary.push(status=403)
    chain = chain_of(primary, backup)
    assert chain.embed_batch(["alpha"])[1] == chain.space == f"text-embedding-test@{primary.url}"


def test_weights_must_not_hold_a_comma_or_a_control_character() -> None:
    for bad in ("a,b", "a\x00", ""):
        with pytest.raises(ValueError, match="weights"):
            ModelSettings(provider="openai", model="e5", dimensions=8, weights=bad)
