"""Every section ``python -m bench`` names imports and has its ``run``: a module moved or renamed under a
section (a helper split off another) fails here, not an hour into a bench run."""

from __future__ import annotations

import importlib
import inspect

import pytest

from bench.__main__ import SECTIONS


@pytest.mark.parametrize("name", sorted(SECTIONS))
def test_a_section_imports_and_runs_by_its_run_function(name: str) -> None:
    module = importlib.import_module(SECTIONS[name])
    assert callable(module.run)
    assert "quick" in inspect.signature(module.run).parameters
