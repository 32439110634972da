"""The columns a source's text template names."""

from __future__ import annotations

import pytest

from store.errors import ConfigError
from store.settings.templates import template_fields


def test_the_fields_a_template_formats_in_order() -> None:
    assert template_fields("{title}\n\n{body}") == ["title", "body"]
    assert template_fields("no fields, {{braces}} escaped") == []


def test_a_bad_template_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"source text template '\{title' is not valid"):
        template_fields("{title")
