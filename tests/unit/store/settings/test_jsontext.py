"""JSON a person typed: parsed, or refused in one line naming the value, the fault and an example."""

from __future__ import annotations

import pytest

from store.errors import ConfigError
from store.settings.jsontext import loads


def test_json_is_parsed() -> None:
    assert loads('{"kind": ["a", 1]}') == {"kind": ["a", 1]}


def test_text_that_is_not_json_names_the_value_the_column_and_an_example() -> None:
    with pytest.raises(ConfigError) as caught:
        loads("{kind: 1}", what="--filter", example='{"kind": "note"}')
    assert str(caught.value) == (
        '--filter is not JSON (Expecting property name enclosed in double quotes at column 2); e.g. {"kind": "note"}'
    )
    with pytest.raises(ConfigError, match=r"^not JSON \(Expecting value at column 1\)$"):
        loads("")


def test_json_nested_too_deep_is_refused_not_a_recursion_error() -> None:
    with pytest.raises(ConfigError, match="line 3 is nested too deep to read .* flatten it"):
        loads("[" * 100_000 + "]" * 100_000, what="line 3")
