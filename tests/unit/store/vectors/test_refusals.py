"""The seam's refusals name the bad value and the fix."""

from __future__ import annotations

import pytest

from store import ConfigError, Filter
from store.vectors.refusals import check_filter, missing, no_keywords


def test_a_filter_that_is_not_one_is_refused_with_an_example() -> None:
    assert check_filter(None) is None
    assert check_filter(Filter.eq("a", 1)) == Filter.eq("a", 1)
    with pytest.raises(ConfigError, match=r"to delete everything use drop_collection"):
        check_filter(None, required=True)
    with pytest.raises(
        ConfigError, match=r"filter must be a Filter \(e.g. Filter.eq\('kind', 'note'\)\), got \{'a': 1\}"
    ):
        check_filter({"a": 1})


def test_the_messages_name_the_command_that_fixes_them() -> None:
    assert "vectorsync collections set docs --keywords" in no_keywords("docs", "hybrid")
    assert "(existing: a, b)" in missing("docs", ["b", "a"])
    assert "(existing: none yet)" in missing("docs", [])
