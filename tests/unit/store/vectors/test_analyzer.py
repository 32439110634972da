"""The keyword analyzer's rules (store/vectors/keyword/analyzer.py): identifiers, stop words, stemming."""

from __future__ import annotations

import importlib

import pytest

from store import ConfigError
from store.settings import SearchSettings
from store.vectors.keyword import analyzer
from store.vectors.modes import SEARCH_MODES


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("git merge --no-ff", ["git", "merg", "no-ff", "ff"]),  # the option whole, unstemmed; "no" a stop word
        ("set git_config", ["set", "git_config", "git", "config"]),
        ("pylint E1101", ["pylint", "e1101"]),  # a word with a digit is kept as it is
        ("os.path.join(a, b).", ["os.path.join", "os", "path", "join", "b"]),  # "a" a stop word; the last dot ends
        ("__init__", ["init"]),  # leading and trailing connectors go
        ("Configured OPTIONS", ["configur", "option"]),  # lower case, stemmed
        ("it's Dana's", ["dana"]),  # apostrophes separate; "it" and "s" are stop words
        ("\uff21\uff22\uff23 café", ["abc", "café"]),  # NFKC folds full-width letters
        ("v1.2.3", ["v1.2.3", "v1", "2", "3"]),
        ("", []),
    ],
)
def test_english_terms(text: str, terms: list[str]) -> None:
    assert analyzer("english").terms(text) == terms


def test_a_query_counts_each_term_once_and_a_document_every_time() -> None:
    english = analyzer("english")
    assert english.query_terms("merge merges merging") == ["merg"]
    assert english.frequencies("merge merges merging")["merg"] == 3


def test_simple_keeps_every_word_as_it_is() -> None:
    assert analyzer("simple").terms("The configured --no-ff") == ["the", "configured", "no-ff", "no", "ff"]


def test_other_languages_stem_and_drop_their_stop_words() -> None:
    assert analyzer("german").terms("die Häuser und Gärten") == ["haus", "gart"]
    assert analyzer("french").terms("la configuration des options") == ["configur", "option"]


def test_overlong_terms_are_dropped() -> None:
    assert analyzer("english").terms("x" * 65 + " kept") == ["kept"]


def test_an_unknown_language_is_refused_naming_the_choices() -> None:
    with pytest.raises(ConfigError, match="analyzer language 'klingon' is not allowed: use one of simple, danish"):
        analyzer("klingon")


def test_the_settings_modes_are_the_search_modes() -> None:
    assert SearchSettings.model_fields["mode"].annotation.__args__ == SEARCH_MODES  # type: ignore[union-attr]


def test_a_remembered_token_gives_the_terms_a_new_analyzer_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    module = importlib.import_module("store.vectors.keyword.analyzer")  # the package's `analyzer` is a function

    text = "Running git-config --global on v1.2 files: the files run_fast"
    warm = module.Analyzer("english")
    first = warm.terms(text)
    assert warm.terms(text) == first == module.Analyzer("english").terms(text)
    assert "git-config" in first and "file" in first and "the" not in first
    monkeypatch.setattr(module, "TOKEN_CACHE", 1)
    bounded = module.Analyzer("english")
    assert bounded.terms(text) == first and len(bounded._tokens) == 1
