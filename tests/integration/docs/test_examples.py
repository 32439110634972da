"""The ``python`` examples marked ``<!-- integration: ... -->`` (the conventions: tests/docs_examples.py): each
page's run here, in order, by the handler ``HANDLERS`` names for it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from store.lifecycle import Collections
from store.settings import load_settings
from tests.docs_examples import Block, blocks, run_python
from tests.integration.state_db import fresh_database

EXAMPLES = [b for b in blocks("python") if b.mark == "integration"]
#: The test app the testing page's example imports: notes in SQLite, saved and enqueued after the commit.
APP_NOTES = """
import sqlalchemy as sa

from producer import index_record

INSERT = sa.text("INSERT INTO notes (kind, body) VALUES (:kind, :body)")


def save_note(session, *, kind, body):
    note_id = session.execute(INSERT, {"kind": kind, "body": body}).lastrowid
    index_record("notes", note_id, session=session)
    session.commit()
    return note_id
"""
APP_FIXTURES = """
import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session


@pytest.fixture
def session():
    engine = sa.create_engine("sqlite:///crm.db")
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, kind TEXT, body TEXT)"))
    with Session(engine) as session:
        yield session
    engine.dispose()
"""
APP_SETTINGS = """
[collections.notes.source]
kind = "sql"
url = "sqlite:///{folder}/crm.db"
table = "notes"
text = "{{body}}"
metadata = ["kind"]
"""


def in_a_state_database(
    page_blocks: list[Block], folder: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """A pgvector store and state database of the test's own, with the declared collections a worker's start
    would have made; the page's examples read it through ./vectorsync.toml."""
    with fresh_database(request.getfixturevalue("postgres_url")) as url:
        (folder / "vectorsync.toml").write_text(
            f'[vectors]\nstore = "pgvector"\nurl = "{url}"\ndimensions = 8\n'
            '\n[collections.activity_notes.source]\nkind = "push"\n'
        )
        monkeypatch.chdir(folder)
        monkeypatch.setenv("VECTORSYNC_CONFIG", str(folder / "vectorsync.toml"))
        with Collections.from_settings(load_settings()) as collections:
            collections.create_declared()
        namespace: dict[str, Any] = {"__name__": "__docs__"}
        for block in page_blocks:
            run_python(block, namespace)


def as_a_pytest_project(
    page_blocks: list[Block], folder: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """Each block's ``# name.py`` parts as files of an app's tests, run by pytest in a process of their own,
    beside the app (``myapp``) and its own fixtures (a SQLAlchemy session on its SQLite database)."""
    for block in page_blocks:
        parts = re.split(r"(?m)^# (\S+\.py)\n", block.text)
        assert len(parts) > 2, f"{block.where}: no '# name.py' line starts a file"
        for name, text in zip(parts[1::2], parts[2::2], strict=True):
            (folder / name).write_text(text)
    (folder / "myapp").mkdir()
    (folder / "myapp" / "__init__.py").write_text("")
    (folder / "myapp" / "notes.py").write_text(APP_NOTES)
    (folder / "myapp" / "fixtures.py").write_text(APP_FIXTURES)
    (folder / "vectorsync.toml").write_text(APP_SETTINGS.format(folder=folder))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VECTORSYNC_", "PYTEST_"))}
    env["PYTHONPATH"] = str(folder)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "myapp.fixtures",
            "-W",
            "ignore::DeprecationWarning",
            ".",
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^\d+ passed", result.stdout.splitlines()[-1]), result.stdout


HANDLERS: dict[str, Callable[[list[Block], Path, pytest.MonkeyPatch, pytest.FixtureRequest], None]] = {
    "docs/store.md": in_a_state_database,
    "docs/testing.md": as_a_pytest_project,
}


@pytest.mark.usefixtures("no_vectorsync_env")
@pytest.mark.parametrize("page", sorted({b.page for b in EXAMPLES}))
def test_the_integration_examples_of_a_page_run(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    assert page in HANDLERS, f"{page} has examples marked integration: give it a handler in HANDLERS"
    HANDLERS[page]([b for b in EXAMPLES if b.page == page], tmp_path, monkeypatch, request)


def test_every_handler_has_examples_to_run() -> None:
    assert sorted(HANDLERS) == sorted({b.page for b in EXAMPLES})
