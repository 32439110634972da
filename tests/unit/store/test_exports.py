"""``store``'s names, imported from their modules on first use: each is its module's own, and importing one
module of ``store`` loads no other (the CLI's start depends on it)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import store


@pytest.mark.parametrize("name", store.__all__)
def test_each_exported_name_is_the_one_its_module_defines(name: str) -> None:
    assert getattr(store, name) is getattr(importlib.import_module(store._HOMES[name]), name)


def test_a_name_store_does_not_export_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'store' has no attribute 'Nothing'"):
        store.Nothing  # type: ignore[attr-defined]  # noqa: B018


def test_importing_the_contract_loads_neither_the_settings_nor_the_client() -> None:
    code = "import sys, store.contract, store.errors; print(sorted(m for m in sys.modules if m.startswith('store')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "['store', 'store.contract', 'store.errors']"
