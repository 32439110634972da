"""A collection's rules, kept with it: what settings that say nothing, say the same, or disagree get."""

from __future__ import annotations

import pytest

from store import ConfigError, VectorRecord
from store.settings import CollectionSettings, SearchSettings
from store.vectors.backends import memory_store
from store.vectors.rules import Declared, Rules, settle


def declared(**values: object) -> Declared:
    return Declared.from_settings(CollectionSettings.model_validate(values))


def test_settings_state_only_the_keys_they_hold() -> None:
    assert declared() == Declared()
    assert declared(required_filter=[]) == Declared(required_filter=())
    assert declared(search={"mode": "hybrid"}) == Declared(keywords=True)
    assert declared(search={"language": "simple", "keywords": False}) == Declared(keywords=False, language="simple")


def test_stored_rules_win_where_the_settings_say_nothing_and_a_disagreement_names_both() -> None:
    stored = Rules(required_filter=("tenant",), keywords=True)
    assert settle("notes", stored, None) == stored
    assert settle("notes", stored, declared(source={"kind": "push"})) == stored
    assert settle("notes", stored, declared(required_filter=["tenant"])) == stored
    with pytest.raises(ConfigError) as refused:
        settle("notes", stored, declared(required_filter=[], search={"keywords": False}))
    message = str(refused.value)
    assert 'required_filter is ["tenant"] there, [] in these settings' in message
    assert "keywords is true there, false in these settings" in message
    assert "vectorsync collections set notes" in message


def test_a_collection_without_stored_rules_takes_what_its_data_shows_then_the_settings() -> None:
    shown = Rules(keywords=True, language="german")
    assert settle("notes", None, None, shown=shown) == shown
    assert settle("notes", None, declared(required_filter=["t"]), shown=shown) == Rules(("t",), True, "german")
    assert settle("notes", None, None) == Rules()


def test_rules_a_newer_release_wrote_are_refused_not_guessed() -> None:
    assert Rules.from_json({"required_filter": ["t"], "keywords": True}, where="x") == Rules(("t",), True)
    with pytest.raises(ConfigError, match="which this vectorsync cannot read: upgrade vectorsync"):
        Rules.from_json({"required_filter": ["t"], "retention_days": 3}, where="collection 'notes'")
    with pytest.raises(ConfigError, match="cannot be read"):
        Rules.from_json({"language": "klingon"}, where="collection 'notes'")


def test_a_store_keeps_the_rules_a_collection_was_made_with_and_set_rules_changes_them() -> None:
    store = memory_store(dimensions=2)
    store.declare("notes", CollectionSettings(required_filter=["tenant"]))
    store.get_collection("notes", create=True).upsert(VectorRecord("a", [1, 0], "garnet", {"tenant": 1}))
    other = memory_store(dimensions=2)  # a reader declaring nothing sees what the collection holds
    other._held = store._held  # type: ignore[attr-defined]
    assert other.rules_of("notes").required_filter == ("tenant",)
    before, after, analyzed = store.set_rules("notes", keywords=True)
    assert (before.keywords, after.keywords, analyzed) == (False, True, 1)
    assert store.get_collection("notes").rules == Rules(("tenant",), True)
    with pytest.raises(ConfigError, match="keywords is true there, false in these settings"):
        store.configure_search("notes", SearchSettings(keywords=False))
