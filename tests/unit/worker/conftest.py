"""Fixtures of the worker's unit tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa


@pytest.fixture
def notes(tmp_path: Path) -> Iterator[str]:
    """A SQLite table of three notes; its URL."""
    url = f"sqlite:///{tmp_path / 'app.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)"))
        conn.execute(sa.text("INSERT INTO notes VALUES (1, 'renewal call'), (2, 'pricing email'), (3, 'pilot')"))
    engine.dispose()
    yield url


@pytest.fixture
def notes_settings(notes: str) -> Callable[..., dict[str, Any]]:
    """Settings over the ``notes`` table for ``producer.testing.queue``: ``notes_settings(max_retries=3)``."""

    def settings(*, max_retries: int) -> dict[str, Any]:
        return {
            "worker": {"max_retries": max_retries, "batch_size": 10},
            "collections": {"notes": {"source": {"kind": "sql", "url": notes, "table": "notes", "text": "{body}"}}},
        }

    return settings
