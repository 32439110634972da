"""An error naming a value a user gave shows its start and its length, not all of it: a 5,000-character
collection name made a 5,000-character error line (issue 48, defect 9e)."""

from __future__ import annotations

import pytest

from store.errors import ECHO_CHARS, ConfigError, echo
from store.settings.collection_names import check_collection_name, check_declared_name


def test_a_short_value_is_echoed_whole_as_its_repr() -> None:
    assert echo("notes") == "'notes'"
    assert echo("a" * ECHO_CHARS) == repr("a" * ECHO_CHARS)
    assert echo(None) == "None"


def test_a_long_value_shows_its_first_characters_and_its_length() -> None:
    assert echo("a" * 5000) == f"{'a' * ECHO_CHARS!r}… (5,000 characters)"
    assert echo("b" * 100, limit=10) == "'bbbbbbbbbb'… (100 characters)"


def test_a_long_value_of_another_type_is_cut_as_its_repr() -> None:
    shown = echo(list(range(2000)))
    assert shown.startswith("[0, 1, 2, ") and shown.endswith("… (a list whose repr has 10,890 characters)")
    assert len(shown) < 120


def test_control_characters_in_the_start_stay_escaped() -> None:
    shown = echo("\x1b[2J" + "x" * 100)
    assert "\x1b" not in shown and shown.startswith("'\\x1b[2J")


@pytest.mark.parametrize("check", [check_collection_name, check_declared_name])
def test_a_collection_name_of_5000_characters_is_named_by_its_start_and_length(check: object) -> None:
    with pytest.raises(ConfigError) as refused:
        check("a" * 5000)  # type: ignore[operator]
    message = str(refused.value)
    assert "a" * (ECHO_CHARS + 1) not in message and "(5,000 characters)" in message
    assert message.startswith(f"collection name {'a' * ECHO_CHARS!r}… (5,000 characters) is not allowed: use 1-48")
    assert len(message) < 250


def test_a_short_bad_collection_name_is_still_named_whole() -> None:
    with pytest.raises(ConfigError, match=r"collection name 'Notes' is not allowed"):
        check_collection_name("Notes")
