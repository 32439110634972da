"""The Python source: a loader named ``module:function``, checked when the source is made, and its records paged
by id in order."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from store import ConfigError
from worker.sources.python import PythonSource

RECORDS: dict[str, dict[str, Any]] = {}


def load_records(ids: list[str] | None) -> Iterable[dict[str, Any]]:
    """The loader these tests name: ``load_records`` of this module."""
    return [r for key, r in RECORDS.items() if ids is None or key in ids]


def test_a_bad_python_loader_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="source.loader 'nope' is not 'module:function'"):
        PythonSource(loader="nope")
    with pytest.raises(ConfigError, match="cannot be loaded"):
        PythonSource(loader=f"{__name__}:no_such_function")


def test_python_source_pages_ids_in_order_loading_them_once_per_sweep() -> None:
    RECORDS.clear()
    RECORDS.update({f"r{i:02d}": {"id": f"r{i:02d}", "text": "t"} for i in range(25)})
    source = PythonSource(loader=f"{__name__}:load_records")
    pages, after = [], None
    while page := source.page_ids(after=after, limit=10):
        pages.append(page)
        after = page[-1]
    assert [len(p) for p in pages] == [10, 10, 5]
    assert [i for p in pages for i in p] == sorted(RECORDS)
