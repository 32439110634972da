"""Every ``python`` example of README.md and docs/*.md runs (the conventions: tests/docs_examples.py).

Each page's examples run in order in one namespace over a settings file of the page's own (``SETTINGS``):
the memory store, the ``fake`` model, a ``memory://`` broker that only this process reads, the collections
the page names. ``names`` gives what the prose assumes the reader has: a note, a SQLAlchemy session, a user,
a few records already indexed. Examples marked ``<!-- integration: ... -->`` run in tests/integration/docs;
``<!-- fragment: ... -->`` ones are only parsed, here.
"""

from __future__ import annotations

import ast
import gc
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from store import VectorRecord
from store.process.defaults import default_client, use_client
from tests.docs_examples import Block, blocks, run_python

#: What every page's settings start with: nothing outside this process.
BASE = """
[broker]
url = "memory://"
coalesce_seconds = 0

[embeddings]
cache_ttl_days = 0

[vectors]
store = "memory"
dimensions = 8
"""
#: The CRM notes table a SQL source reads (SQLite in the test's folder; ``{db}`` is its URL).
CRM_NOTES = """
[collections.activity_notes.source]
kind = "sql"
url = "{db}"
table = "notes"
text = "{title}\\n\\n{body}"
metadata = ["kind", "owner_id", "workspace_id", "created_at"]
updated_at = "updated_at"
"""
PUSHED = '\n[collections.{name}.source]\nkind = "push"\n'
#: The README's collection: the demo's (``vectorsync dev``, producer/cli/dev/config.py), over the same table.
DEMO_NOTES = CRM_NOTES.replace("activity_notes", "crm_notes")
#: Records the pages' searches find: (id, text, metadata).
INDEXED = [
    (
        "42",
        "Dana asked to move the kickoff call again; onboarding now starts on the 14th",
        {"kind": "call", "owner_id": 7, "workspace_id": 7, "created_at": "2026-10-02"},
    ),
    (
        "43",
        "Onboarding delays: the contract is still with legal",
        {"kind": "email", "owner_id": 8, "workspace_id": 7, "created_at": "2026-10-05"},
    ),
    (
        "44",
        "Pricing question about onboarding seats",
        {"kind": "call", "owner_id": 9, "workspace_id": 8, "created_at": "2026-10-07"},
    ),
]


def crm_database(folder: Path) -> str:
    """A SQLite CRM with a ``notes`` table of the INDEXED rows; its URL."""
    url = f"sqlite:///{folder / 'crm.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT, body TEXT, kind TEXT, "
                "owner_id INTEGER, workspace_id INTEGER, created_at TEXT, updated_at TEXT)"
            )
        )
        for record_id, text, meta in INDEXED:
            conn.execute(
                sa.text(
                    "INSERT INTO notes VALUES (:id, 'Note', :body, :kind, :owner_id, :workspace_id, "
                    ":created_at, :created_at)"
                ),
                {"id": int(record_id), "body": text, **meta},
            )
    engine.dispose()
    return url


def index(collection: str) -> None:
    """Put INDEXED in ``collection`` of the default client's store, as workers would have."""
    client = default_client()
    client.get_collection(collection).upsert_many(
        [
            VectorRecord(
                f"{record_id}:0", client.embeddings.embed(text), text, {**meta, "record_id": record_id, "chunk": 0}
            )
            for record_id, text, meta in INDEXED
        ]
    )


def app_objects(folder: Path, db: str, stack: ExitStack) -> dict[str, Any]:
    """What an app has at hand: a note, a SQLAlchemy session on its database, a document's text and URL."""
    engine = sa.create_engine(db)
    stack.callback(engine.dispose)
    session = stack.enter_context(Session(engine))
    return {
        "note": SimpleNamespace(id=42),
        "session": session,
        "text": "Pricing: 20% off for a yearly plan",
        "url": "https://example.com/pricing.pdf",
    }


class Note:
    """An app's model with its own access rule: a user reads the notes of their own workspace."""

    @staticmethod
    def ids_visible_to(user: SimpleNamespace, ids: set[int]) -> list[int]:
        return [int(r) for r, _, meta in INDEXED if int(r) in ids and meta["workspace_id"] == user.workspace_id]


def store_names(folder: Path, db: str, stack: ExitStack) -> dict[str, Any]:
    chunk = VectorRecord(
        "42:1", [0.5] * 8, "Dana's kickoff moved to the 14th", {"kind": "call", "record_id": "42", "chunk": 1}
    )
    return {"embedding": [0.1] * 8, "query_vector": [0.2] * 8, "new_chunks": [chunk]}


def filters_names(folder: Path, db: str, stack: ExitStack) -> dict[str, Any]:
    index("activity_notes")
    return {"user": SimpleNamespace(workspace_id=7, name="dana"), "Note": Note}


def answers_names(folder: Path, db: str, stack: ExitStack) -> dict[str, Any]:
    index("activity_notes")
    return {}


def embeddings_names(folder: Path, db: str, stack: ExitStack) -> dict[str, Any]:
    index("notes")
    return {"notes": default_client().get_collection("notes")}


def search_modes_names(folder: Path, db: str, stack: ExitStack) -> dict[str, Any]:
    index("manuals")
    return {}


def evaluation_names(folder: Path, db: str, stack: ExitStack) -> dict[str, Any]:
    """The team's labelled queries file the page reads (tests/queries.jsonl), over INDEXED."""
    index("notes")
    queries = folder / "tests" / "queries.jsonl"
    queries.parent.mkdir()
    queries.write_text(
        '{"query": "when does onboarding start after the kickoff call", "relevant": ["42"]}\n'
        '{"query": "contract still with legal", "relevant": ["43"], "filter": {"kind": "email"}}\n'
    )
    return {}


def frameworks_names(folder: Path, db: str, stack: ExitStack) -> dict[str, Any]:
    from langchain_core.documents import Document
    from llama_index.core.llms import MockLLM

    index("notes")
    docs = [Document("Pricing: 20% off for a yearly plan"), Document("Pricing: seats are billed monthly")]
    return {"docs": docs, "llm": MockLLM()}


def in_the_test_kit(folder: Path, db: str, stack: ExitStack) -> dict[str, Any]:
    """The page's sends go to producer.testing's queue (its reads of runs to its memory ledger)."""
    from producer import testing

    stack.enter_context(testing.queue())
    return app_objects(folder, db, stack)


#: Each page with python examples: its settings after BASE (``{db}``: the CRM's URL) and the names it assumes.
SETTINGS: dict[str, tuple[str, Callable[[Path, str, ExitStack], dict[str, Any]]]] = {
    "README.md": (DEMO_NOTES + PUSHED.replace("{name}", "uploads"), app_objects),
    "docs/store.md": (CRM_NOTES + PUSHED.replace("{name}", "notes"), store_names),
    "docs/filters.md": (
        CRM_NOTES + '\n[collections.activity_notes]\nrequired_filter = ["workspace_id"]\n'
        '\n[collections.activity_notes.index]\nfields = { workspace_id = "integer" }\n',
        filters_names,
    ),
    "docs/embeddings.md": (PUSHED.replace("{name}", "notes"), embeddings_names),
    "docs/answers.md": (CRM_NOTES, answers_names),
    "docs/app-and-cli.md": (CRM_NOTES + PUSHED.replace("{name}", "uploads") + 'id_field = "url"\n', in_the_test_kit),
    "docs/search-modes.md": (
        PUSHED.replace("{name}", "manuals") + "\n[collections.manuals.search]\nkeywords = true\n",
        search_modes_names,
    ),
    "docs/evaluation.md": (
        PUSHED.replace("{name}", "notes") + '\n[collections.notes.search]\nmode = "hybrid"\n',
        evaluation_names,
    ),
    "docs/frameworks.md": (PUSHED.replace("{name}", "notes") + PUSHED.replace("{name}", "scratch"), frameworks_names),
}


def runnable(block: Block) -> bool:
    return block.mark is None


PAGES_WITH_EXAMPLES = sorted({b.page for b in blocks("python") if runnable(b)})


@contextmanager
def page_settings(page: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The page's settings file as VECTORSYNC_CONFIG and ./vectorsync.toml, a default client built from it, and
    the page's names; everything closed afterwards."""
    extra, names = SETTINGS[page]
    db = crm_database(folder)
    (folder / "vectorsync.toml").write_text(BASE + extra.replace("{db}", db))
    monkeypatch.chdir(folder)
    monkeypatch.setenv("VECTORSYNC_CONFIG", str(folder / "vectorsync.toml"))
    previous = use_client(None)
    with ExitStack() as stack:
        stack.callback(lambda: _restore(previous))
        yield names(folder, db, stack)


def _restore(previous: Any) -> None:
    built = use_client(previous)
    if built is not None:
        built.close()


@pytest.mark.usefixtures("no_vectorsync_env")
@pytest.mark.parametrize("page", PAGES_WITH_EXAMPLES)
def test_the_python_examples_of_a_page_run_in_order(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert page in SETTINGS, f"{page} has python examples: give it its settings and names in SETTINGS"
    with page_settings(page, tmp_path, monkeypatch) as names, warnings.catch_warnings():
        # A coroutine an example leaves unawaited on purpose (the sync-and-async mix-up) warns when collected.
        warnings.filterwarnings("ignore", r".* was never awaited", RuntimeWarning)
        namespace: dict[str, Any] = {"__name__": "__docs__", **names}
        for block in blocks("python", pages=[page]):
            if runnable(block):
                run_python(block, namespace)
        namespace.clear()
        gc.collect()  # here, where that warning is expected


@pytest.mark.parametrize("block", [b for b in blocks("python") if not runnable(b)], ids=lambda b: b.where)
def test_a_marked_python_example_still_parses_and_says_why(block: Block) -> None:
    ast.parse(block.text, block.where)
    assert block.reason.strip(), f"{block.where}: say why it is not run here"


def test_fragments_are_a_small_minority_and_every_page_with_examples_has_settings() -> None:
    python = blocks("python")
    fragments = [b.where for b in python if b.mark == "fragment"]
    assert len(fragments) * 5 <= len(python), fragments
    assert sorted(SETTINGS) == PAGES_WITH_EXAMPLES  # no setup left for a page that lost its examples


def test_the_runner_holds_an_example_to_its_expected_error() -> None:
    raises = Block("docs/x.md", 10, "python", "{}[\"missing\"]\n# KeyError: 'missing'\n")
    run_python(raises, {})
    with pytest.raises(AssertionError, match=r"docs/x.md:10 should raise KeyError"):
        run_python(Block("docs/x.md", 10, "python", "x = 1\n# KeyError: 'missing'\n"), {})
    with pytest.raises(NameError):
        run_python(Block("docs/x.md", 10, "python", "undefined_name\n"), {})
