"""Importing the producer stays light: a fresh interpreter imports it without sqlalchemy or numpy, and without
loading the worker or torch (the import rules themselves are read from the code in tests/unit/test_layout.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.workers import ROOT


@pytest.mark.parametrize("blocked", ["sqlalchemy", "numpy"])
def test_producer_imports_without_sqlalchemy_or_numpy(blocked: str) -> None:
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "import producer, producer.testing, producer.pytest_plugin, store, store.process.defaults\n"
        "client = store.Client(store.Settings()); client.producer; client.close()  # an enqueueing client\n"
        "assert 'worker' not in sys.modules and 'torch' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


#: Every module of ours that runs in app code, a worker or the CLI: all but the framework adapters (which
#: import their framework) and Alembic's migration scripts (which only Alembic runs).
IMPORT_EVERYTHING = """
import importlib, pkgutil, sys
SKIPPED = ("store.adapters", "producer.django", "store.state.migrations")
def everything(name):
    module = importlib.import_module(name)
    for info in pkgutil.iter_modules(getattr(module, "__path__", []), name + "."):
        if not info.name.startswith(SKIPPED) and not info.name.endswith("__main__"):
            everything(info.name)
for package in ("store", "worker", "producer"):
    everything(package)
"""
#: The frameworks the adapters are for, as their top-level modules.
FRAMEWORKS = ("django", "langchain", "langchain_core", "llama_index")


def test_the_core_loads_no_framework_when_they_are_installed() -> None:
    # kombu's JSON module probes for Django's lazy strings (django.utils.functional) when Django is installed:
    # a few modules of utilities, never its settings, app registry or ORM.
    code = IMPORT_EVERYTHING + (
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in {'langchain', 'langchain_core', 'llama_index'}"
        " or m.startswith(('django.conf', 'django.apps', 'django.db', 'django.core')))\n"
        "assert loaded == [], loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_core_needs_no_framework() -> None:
    blocked = "".join(f"sys.modules[{name!r}] = None\n" for name in FRAMEWORKS)
    code = "import sys\n" + blocked + IMPORT_EVERYTHING
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_importing_producer_loads_no_heavy_library() -> None:
    code = (
        "import sys, producer; heavy = {'numpy', 'torch', 'qdrant_client', 'openai', 'sentence_transformers', "
        "'worker', 'httpx'} & set(sys.modules); print(sorted(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
