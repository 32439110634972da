"""The error tree, and ``echo``: an error naming a value a user gave shows its start and its length, not all of
it (a 5,000-character collection name made a 5,000-character error line: issue 48, defect 9e)."""

from __future__ import annotations

from store.errors import (
    ECHO_CHARS,
    BrokerUnavailable,
    ConfigError,
    EmbeddingError,
    ProviderError,
    SchemaTooNew,
    StoreError,
    StoreUnavailable,
    TransientError,
    VectorsyncError,
    echo,
)


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


def test_a_too_new_schema_is_a_config_error_and_a_config_error_a_value_error() -> None:
    """Callers catch what they can act on: a bad value (ConfigError, also a ValueError), a backend down."""
    assert issubclass(SchemaTooNew, ConfigError) and issubclass(ConfigError, ValueError)
    assert issubclass(BrokerUnavailable, StoreUnavailable) and issubclass(StoreUnavailable, StoreError)
    assert all(issubclass(e, VectorsyncError) for e in (ConfigError, StoreError, ProviderError))
    assert EmbeddingError is ProviderError


def test_a_transient_error_carries_its_wait_and_whether_it_was_a_rate_limit() -> None:
    plain = TransientError("503")
    assert (str(plain), plain.retry_after, plain.rate_limited) == ("503", None, False)
    limited = TransientError("429", retry_after=2.5, rate_limited=True)
    assert (limited.retry_after, limited.rate_limited) == (2.5, True)
