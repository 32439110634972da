"""The names a collection may take: a generation's name (``NAME__gN``) is made by ``vectorsync migrate``, never
declared, and a long bad name is named by its start and length."""

from __future__ import annotations

import pytest

from store.errors import ECHO_CHARS, ConfigError
from store.settings.collection_names import check_collection_name, check_declared_name, parse_name


def test_a_generation_s_name_parses_to_its_collection_and_number() -> None:
    assert parse_name("notes__g2") == ("notes", 2)
    assert parse_name("activity_notes__g120") == ("activity_notes", 120)
    assert parse_name("notes") == ("notes", None)
    assert parse_name("notes__g0") == ("notes__g0", None)  # generations count from 1


def test_a_generation_s_name_is_a_collection_name_but_not_one_to_declare() -> None:
    assert check_collection_name("notes__g2") == "notes__g2"
    with pytest.raises(ConfigError, match=r"ends like a generation .* e.g. 'notes_g2'"):
        check_declared_name("notes__g2")
    assert check_declared_name("notes") == "notes"


@pytest.mark.parametrize("bad", ["Notes", "1notes", "", "a" * 49, "no-tes", 7, None])
def test_a_bad_name_is_refused_with_the_rule(bad: object) -> None:
    with pytest.raises(ConfigError, match="use 1-48 lower-case letters, digits and '_', starting with a letter"):
        check_collection_name(bad)


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
