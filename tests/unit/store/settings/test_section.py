"""The base of every section: unknown keys refused, frozen, no inf or nan, and a repr without credentials."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic import ValidationError

from store.settings.section import Section, redacted_repr_args, values_for


class Example(Section):
    url: str = "postgresql://app:hunter2@db/app?password=pw2"
    seconds: float = 1.0


def test_an_unknown_key_is_refused_and_a_section_is_frozen() -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Example.model_validate({"secnods": 2})
    with pytest.raises(ValidationError, match="frozen"):
        Example().seconds = 2.0


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_inf_and_nan_are_refused(value: float) -> None:
    with pytest.raises(ValidationError):
        Example(seconds=value)


def test_the_repr_hides_every_url_s_credentials() -> None:
    shown = repr(Example())
    assert shown.startswith("Example(url='postgresql://db/app?password=***'")
    assert "hunter2" not in shown and "pw2" not in shown
    assert dict(redacted_repr_args(Example(url="plain text"))) == {"url": "plain text", "seconds": 1.0}


def test_a_class_built_from_a_section_takes_the_values_of_its_fields_by_name() -> None:
    @dataclass(frozen=True)
    class Tuning:
        seconds: float = 0.0
        pool_size: int = 5  # not a setting: left to its default

    assert values_for(Tuning, Example(seconds=2.5)) == {"seconds": 2.5}
    assert Tuning(**values_for(Tuning, Example(seconds=2.5))) == Tuning(seconds=2.5, pool_size=5)
