"""Settings: TOML plus environment overrides; bad values fail at load, naming key, value and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import ConfigError, load_settings


@pytest.fixture(autouse=True)
def clean_env(no_vectorsync_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "vectorsync.toml"
    path.write_text(text)
    return path


FULL = """
[broker]
url = "redis://broker:6379/1"

[models.small]
provider = "openai"
model = "text-embedding-3-small"
dimensions = 1536
api_key_env = "OPENAI_API_KEY"

[models.backup]
provider = "openai"
model = "text-embedding-3-small"
dimensions = 1536
base_url = "https://backup.example/v1"

[embeddings]
chain = ["small", "backup"]
batch_size = 64

[vectors]
store = "pgvector"
url = "postgresql://app@db/app"
metric = "dot"

[collections.activity_notes.source]
kind = "sql"
url = "postgresql://app@db/crm"
table = "notes"
text = "{title}\\n\\n{body}"
metadata = ["kind", "created_at"]

[collections.activity_notes.chunker]
max_tokens = 256
markdown = true
"""


def test_a_full_file_loads(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, FULL))
    assert settings.embeddings.chain == ["small", "backup"]
    assert settings.models["backup"].base_url == "https://backup.example/v1"
    assert settings.vectors.metric == "dot"
    assert settings.collections["activity_notes"].chunker.max_tokens == 256
    assert settings.collections["activity_notes"].source.metadata == ["kind", "created_at"]


def test_defaults_derive_state_and_cache_urls(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, FULL))
    assert settings.state_url == "postgresql://app@db/app"  # the pgvector database
    assert settings.cache_url == "redis://broker:6379/1"  # the broker's Redis
    empty = load_settings(write(tmp_path, ""))
    assert (empty.vectors.store, empty.vectors.dimensions, empty.embeddings.batch_size) == ("pgvector", 1536, 96)
    assert empty.embeddings.cache_ttl_days == 30


def test_environment_overrides_the_file_key_by_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VECTORSYNC_VECTORS__METRIC", "euclidean")
    monkeypatch.setenv("VECTORSYNC_EMBEDDINGS__CHAIN", '["backup"]')
    monkeypatch.setenv("VECTORSYNC_VECTORS__KEY", "secret-key")
    settings = load_settings(write(tmp_path, FULL))
    assert settings.vectors.metric == "euclidean"
    assert settings.vectors.url == "postgresql://app@db/app"  # the rest of the section stays
    assert settings.embeddings.chain == ["backup"]
    assert settings.vectors.key is not None and settings.vectors.key.get_secret_value() == "secret-key"
    assert "secret-key" not in repr(settings)


def test_config_path_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other.toml"
    other.write_text('[vectors]\nstore = "memory"\n')
    monkeypatch.setenv("VECTORSYNC_CONFIG", str(other))
    assert load_settings().vectors.store == "memory"


def test_the_default_file_is_optional_but_a_named_one_must_exist(tmp_path: Path) -> None:
    assert load_settings().broker.url == "redis://127.0.0.1:6379/0"
    with pytest.raises(ConfigError, match="settings file '.*nope.toml' does not exist"):
        load_settings(tmp_path / "nope.toml")


def test_a_bad_value_names_the_key_the_value_and_what_is_allowed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load_settings(write(tmp_path, '[vectors]\nmetric = "cosin"\n'))
    assert "setting vectors.metric = 'cosin' is not allowed: Input should be 'cosine', 'dot' or 'euclidean'" in str(
        error.value
    )
    assert "VECTORSYNC_VECTORS__METRIC" in str(error.value)


def test_a_bad_environment_value_is_reported_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VECTORSYNC_EMBEDDINGS__BATCH_SIZE", "lots")
    with pytest.raises(ConfigError, match="setting embeddings.batch_size = 'lots' is not allowed"):
        load_settings()


def test_unknown_keys_are_rejected_not_ignored(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown setting 'vectors.dimension': remove it or check its spelling"):
        load_settings(write(tmp_path, "[vectors]\ndimension = 8\n"))
    with pytest.raises(ConfigError, match="unknown setting 'vector'"):
        load_settings(write(tmp_path, "[vector]\nstore = 'memory'\n"))


def test_a_bad_provider_and_a_bad_collection_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="setting models.m.provider = 'openia' is not allowed"):
        load_settings(write(tmp_path, '[models.m]\nprovider = "openia"\nmodel = "x"\ndimensions = 8\n'))
    with pytest.raises(ConfigError, match="collection name 'Notes' is not allowed"):
        load_settings(write(tmp_path, '[collections.Notes.source]\nkind = "sql"\n'))


def test_secrets_are_refused_in_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="vectors.key is a secret .* set VECTORSYNC_VECTORS__KEY"):
        load_settings(write(tmp_path, '[vectors]\nkey = "abc"\n'))


def test_broken_toml_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="vectorsync.toml is not valid TOML"):
        load_settings(write(tmp_path, "[vectors\n"))


def test_a_bad_section_is_reported_without_the_passwords_inside_it(tmp_path: Path) -> None:
    text = '[collections.Bad.source]\nkind = "sql"\nurl = "postgresql://app:hunter2@db/crm"\n'
    with pytest.raises(ConfigError) as error:
        load_settings(write(tmp_path, text))
    assert "hunter2" not in str(error.value) and "collection name 'Bad' is not allowed" in str(error.value)
    with pytest.raises(ConfigError) as error:
        bad = '[state]\nurl = "postgresql://app:hunter2@db:bad/x"\n[worker]\ntime_limit = -1\n'
        load_settings(write(tmp_path, bad))
    assert "hunter2" not in str(error.value)


def test_chunker_overlap_must_be_below_max_tokens_at_load(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"chunker overlap \(64\) must be below max_tokens \(64\)"):
        load_settings(write(tmp_path, "[collections.notes.chunker]\nmax_tokens = 64\noverlap = 64\n"))


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


def test_vectors_precision_is_float_by_default_and_half_on_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert load_settings(write(tmp_path, "")).vectors.precision == "float"
    assert load_settings(write(tmp_path, '[vectors]\nprecision = "half"\n')).vectors.precision == "half"
    monkeypatch.setenv("VECTORSYNC_VECTORS__PRECISION", "half")
    assert load_settings(write(tmp_path, "")).vectors.precision == "half"


def test_a_vectors_precision_other_than_float_or_half_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"setting vectors.precision = 'double' is not allowed: .*'float' or 'half'"):
        load_settings(write(tmp_path, '[vectors]\nprecision = "double"\n'))


@pytest.mark.parametrize("store", ["memory", "qdrant"])
def test_half_precision_with_another_store_than_pgvector_is_refused_at_load(tmp_path: Path, store: str) -> None:
    text = f'[vectors]\nstore = "{store}"\nurl = "http://127.0.0.1:6333"\nprecision = "half"\n'
    expected = (
        f'precision "half" is a pgvector storage \\(halfvec\\); the {store} store keeps float vectors: '
        'set vectors.precision = "float", or use vectors.store = "pgvector"'
    )
    with pytest.raises(ConfigError, match=expected):
        load_settings(write(tmp_path, text))
