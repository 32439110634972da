"""``load_settings`` and ``Settings``: TOML plus environment overrides; bad values fail at load, naming key, value
and fix (each section's own rules are tested beside its module)."""

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


def test_a_bad_collection_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="collection name 'Notes' is not allowed"):
        load_settings(write(tmp_path, '[collections.Notes.source]\nkind = "sql"\n'))


def test_the_broker_must_outwait_a_task_s_time_limit(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"broker.visibility_timeout \(1800\) must be above worker.time_limit \(1800\)"
    ):
        load_settings(write(tmp_path, "[broker]\nvisibility_timeout = 1800\n"))
    assert load_settings(write(tmp_path, "[broker]\nvisibility_timeout = 1801\n")).broker.visibility_timeout == 1801
