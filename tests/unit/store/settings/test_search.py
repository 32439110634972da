"""``[collections.NAME.search]``: defaults, and bad values refused with the value and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import ConfigError
from store.settings import SearchSettings, load_settings
from store.vectors.backends import memory_store


def settings_file(tmp_path: Path, search: str) -> Path:
    path = tmp_path / "vectorsync.toml"
    path.write_text(f'[vectors]\nstore = "memory"\ndimensions = 4\n\n[collections.notes.search]\n{search}\n')
    return path


def test_defaults() -> None:
    # The fusion defaults are the quality bench's choice (docs/quality-results.md).
    assert SearchSettings() == SearchSettings(
        mode="vector", language="english", vector_weight=2.0, keyword_weight=1.0, rrf_k=10
    )


def test_declared_settings_reach_the_collection(tmp_path: Path) -> None:
    from store.vectors.backends import open_store

    settings = load_settings(settings_file(tmp_path, 'mode = "hybrid"\nlanguage = "german"\nrrf_k = 10'))
    collection = open_store(settings).get_collection("notes", create=True)
    assert (collection.search_settings.mode, collection.analyzer.language, collection.search_settings.rrf_k) == (
        "hybrid",
        "german",
        10,
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            'mode = "fuzzy"',
            r"collections\.notes\.search\.mode = 'fuzzy' is not allowed: .*'vector', 'keyword' or "
            r"'hybrid'.*VECTORSYNC_COLLECTIONS__NOTES__SEARCH__MODE",
        ),
        ('language = "klingon"', r"collections\.notes\.search\.language = 'klingon' is not allowed: .*'english'"),
        ("rrf_k = 0", r"collections\.notes\.search\.rrf_k = 0 is not allowed: .*greater than or equal to 1"),
        ("vector_weight = -1", r"collections\.notes\.search\.vector_weight = -1 is not allowed"),
        ("vector_weight = 0\nkeyword_weight = 0", r"both 0: hybrid search would rank nothing; give at least one"),
        ("boost = 2", r"unknown setting 'collections\.notes\.search\.boost': remove it or check its spelling"),
    ],
)
def test_bad_values_are_refused_naming_the_value_and_the_fix(tmp_path: Path, line: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(settings_file(tmp_path, line))


def test_a_language_change_analyzes_the_stored_text_again() -> None:
    store = memory_store(dimensions=2)
    store.configure_search("notes", SearchSettings(keywords=True))
    collection = store.get_collection("notes", create=True)
    from store import VectorRecord

    collection.upsert(VectorRecord("a", [1, 0], "the configured options"))
    assert collection.search("configuring", mode="keyword")
    store.set_rules("notes", language="simple")  # the stored text analyzed again, nothing embedded
    assert collection.search("configuring", mode="keyword") == []
    assert [m.id for m in collection.search("the", mode="keyword")] == ["a"]


def test_the_keyword_index_is_kept_where_the_settings_search_by_keyword() -> None:
    assert not SearchSettings().keeps_keywords  # vector mode, keywords unset: no keyword index
    assert SearchSettings(keywords=True).keeps_keywords
    assert SearchSettings(mode="keyword").keeps_keywords
    assert SearchSettings(mode="hybrid").keeps_keywords


def test_keywords_off_with_a_keyword_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="search.mode = 'hybrid' reads the keyword index, which search.keywords"):
        load_settings(settings_file(tmp_path, 'mode = "hybrid"\nkeywords = false'))


def test_a_vector_mode_memory_collection_analyzes_nothing() -> None:
    from store import VectorRecord

    store = memory_store(dimensions=2)
    collection = store.get_collection("notes", create=True)
    collection.upsert_many([VectorRecord("a", [1, 0], "the configured options")])
    assert collection._terms == {}  # type: ignore[attr-defined]
    store.set_rules("notes", keywords=True)
    assert [m.id for m in collection.search("configuring", mode="keyword")] == ["a"]
    assert collection._terms != {}  # type: ignore[attr-defined]
