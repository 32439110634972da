"""Importing the producer stays light: a fresh interpreter imports it without sqlalchemy or numpy, and without
loading the worker or torch (the import rules themselves are read from the code in tests/unit/test_layout.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.workers import ROOT


@pytest.mark.parametrize("blocked", ["sqlalchemy", "numpy"])
def test_producer_imports_without_sqlalchemy_or_numpy(blocked: str) -> None:
    code = (f"import sys; sys.modules[{blocked!r}] = None\n"
            "import producer, producer.client, producer.testing, producer.pytest_plugin, store\n"
            "client = store.Client(store.Settings()); client.producer; client.close()  # an enqueueing client\n"
            "assert 'worker' not in sys.modules and 'torch' not in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
