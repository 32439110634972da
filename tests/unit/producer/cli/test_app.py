"""The ``vectorsync`` app as a person first meets it: ``--help`` starts light, and reads as the flags it has."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
#: What a command loads when it runs, never to say its help: Celery and its broker clients, numpy, the settings
#: (pydantic-settings), the databases' drivers, the embedding providers and their HTTP client.
HEAVY = (
    "celery",
    "kombu",
    "redis",
    "numpy",
    "sqlalchemy",
    "httpx",
    "pydantic_settings",
    "store.settings",
    "store.embeddings",
    "torch",
)
#: ``vectorsync ARGS`` run in this interpreter as the console script runs it, then the heavy modules it loaded.
LOADED = f"""
import sys
from producer.cli import main
sys.argv = ["vectorsync", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print([m for m in sorted(sys.modules) if any(m == h or m.startswith(h + ".") for h in {HEAVY!r})], file=sys.stderr)
"""


def _cli(folder: Path, *args: str, code: str | None = None) -> subprocess.CompletedProcess[str]:
    """``vectorsync ARGS`` in a fresh interpreter, piped, 80 columns, from ``folder`` (empty: no settings found)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VECTORSYNC_CONFIG", "FORCE_COLOR")}
    env.update(COLUMNS="80", PYTHONPATH=str(ROOT))
    argv = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "producer.cli", *args]
    return subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=60, check=False)


def _heavy_loaded(folder: Path, *args: str) -> list[str]:
    done = _cli(folder, *args, code=LOADED)
    assert "Usage: vectorsync" in done.stdout + done.stderr, done.stderr  # no arguments: the help, on stderr
    return list(ast.literal_eval(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", [(), ("--help",), ("status", "--help"), ("collections", "list", "--help")])
def test_help_loads_no_celery_redis_numpy_settings_or_providers(tmp_path: Path, args: tuple[str, ...]) -> None:
    """The heavy libraries load inside the command that needs them, so ``--help`` starts in a tenth of a second."""
    assert _heavy_loaded(tmp_path, *args) == []


@pytest.mark.parametrize("args", [("--help",), ("status", "--help"), ("reindex", "--help"), ("collections", "--help")])
def test_help_shows_no_type_beside_a_flag(tmp_path: Path, args: tuple[str, ...]) -> None:
    """A flag takes no value: ``--json <bool>`` read as if it took one (typer 0.29's rich panel types every option)."""
    done = _cli(tmp_path, *args)
    assert done.returncode == 0, done.stderr
    assert "--help" in done.stdout and "<bool>" not in done.stdout
