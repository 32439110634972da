"""VectorStore names kept for one release after a rename."""

from __future__ import annotations

import pytest

from store import memory_store


def test_searching_still_answers_for_one_release_with_a_deprecation_warning() -> None:
    store = memory_store(dimensions=4)
    with pytest.warns(DeprecationWarning, match="use search_settings_of"):
        assert store.searching("notes") == store.search_settings_of("notes")
