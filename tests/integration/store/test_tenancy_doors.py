"""Tenancy on every door: a collection's required filter is kept with it in PostgreSQL, so a process whose
settings omit the rule still cannot read, count, explain, delete or overwrite another tenant's record through
any public entry point. The doors are a table (``tenancy_doors.py``); a public entry point with no row fails
``test_every_public_entry_point_has_a_row``."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer.main

import store.query
from producer.cli.app import app
from store import Client, Filter, VectorRecord, load_settings
from store.adapters import langchain, llamaindex
from tests.integration.state_db import fresh_database
from tests.integration.store.tenancy_doors import SECRET, doors

ROOT = Path(__file__).resolve().parents[3]
MODEL = (
    '[models.hashed]\nprovider = "fake"\nmodel = "fake"\ndimensions = 8\n'
    '[embeddings]\nchain = ["hashed"]\ncache_ttl_days = 0\n'
)
#: Doors that only some callers reach without the filter: scoped ones may answer, tenant 1's own records.
MAY_ANSWER = {name for name in doors(Path("/tmp")) if name.endswith("scoped")}
#: Public entry points that read no record's text or write none by id, and why.
NOT_DOORS = {
    "Client.rerank": "reorders the matches its caller passes in: it reads no collection",
    "query.rerank": "the same, as a helper",
    "query.arerank": "the same, async",
    "query.store_from_settings": "builds a store; its collections are opened through the doors above",
    "Client.verify": "an operator's check: ids, hashes and counts, no text, through the ledger's own reads",
    "Client.plan": "an operator's estimate: counts and costs, no text",
    "Client.get_collection": "opens the collection whose search and count are doors above",
    "Client.from_settings": "builds a client",
    "Client.close": "closes a client",
    "langchain from_texts": "add_documents on a new store (a door above)",
    "langchain client": "the client the store reads through",
    "langchain embeddings": "embeds the caller's own texts",
}
#: CLI commands that print no record's text, and why.
NOT_CLI_DOORS = {
    "collections",
    "capture",
    "dev",
    "doctor",
    "failures",
    "init",
    "migrate",
    "reconcile",
    "reindex",
    "relay",
    "runs",
    "status",
    "verify",
    "version",
    "workers",
    "forget",
    "index",
}


def _settings(path: Path, url: str, collection: str) -> Path:
    path.write_text(
        f'[vectors]\nstore = "pgvector"\nurl = "{url}"\ndimensions = 8\n[state]\nurl = "{url}"\n'
        f"{MODEL}[collections.notes]\n{collection}"
    )
    return path


@pytest.fixture(scope="module")
def scoped(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A collection made by settings that require ``tenant``, with one record of tenant 1 and one of tenant 2;
    yields the settings of a reader that omits the rule, and the database."""
    folder = tmp_path_factory.mktemp("tenancy")
    with fresh_database(postgres_url) as url:
        rule = 'required_filter = ["tenant"]\nsource = { kind = "push" }\nsearch = { keywords = true }\n'
        writer = _settings(folder / "writer.toml", url, rule)
        client = Client.from_settings(load_settings(writer))
        notes = client.store.get_collection("notes", create=True)
        texts = {"a": ("garnet harbour refunds take 14 days", 1), "b": (f"the {SECRET} refund code is 4471", 2)}
        notes.upsert_many(
            VectorRecord(f"{id}:0", list(client.embeddings.embed(text)), text, {"tenant": tenant, "record_id": id})
            for id, (text, tenant) in texts.items()
        )
        client.close()
        yield _settings(folder / "reader.toml", url, 'source = { kind = "push" }\n'), url


def test_no_door_gives_another_tenant_s_text_to_a_process_whose_settings_omit_the_rule(
    scoped: tuple[Path, str], tmp_path: Path
) -> None:
    reader, _ = scoped
    env = {**os.environ, "VECTORSYNC_CONFIG": str(reader), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.integration.store.tenancy_doors", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(results) == set(doors(tmp_path))
    leaked = {name: result for name, result in results.items() if result.startswith("LEAKED")}
    assert not leaked
    answered = {name for name, result in results.items() if result == "answered"}
    # within tenant 1 they answer (without tenant 2's record); unscoped, and writing tenant 2's, they refuse
    assert answered == MAY_ANSWER - {"langchain add_documents scoped"}, results
    # the refused writes wrote nothing: tenant 2's record is there, as it was
    writer = Client.from_settings(load_settings(reader))
    try:
        notes = writer.store.get_collection("notes")
        assert notes.required_filter == ("tenant",)  # the collection's rule, not the reader's settings'
        [kept] = notes.search([1.0] * 8, filter=Filter.eq("tenant", 2) & Filter.eq("record_id", "b"))
        assert SECRET in kept.text
    finally:
        writer.close()


def test_every_public_entry_point_has_a_row(tmp_path: Path) -> None:
    table = set(doors(tmp_path))
    rows = {name.split(" ")[0] for name in table} | {" ".join(n.split(" ")[:2]) for n in table}
    public = {f"Client.{n}" for n, _ in inspect.getmembers(Client) if not n.startswith("_")}
    public -= {f"Client.{n}" for n in ("collections", "embeddings", "generations", "ledger", "producer")}
    public -= {f"Client.{n}" for n in ("retrieval", "router", "store")}  # the parts; their doors are above
    public |= {f"query.{n}" for n in store.query.__all__}
    store_methods = [n for n in vars(langchain.VectorsyncVectorStore) if not n.startswith("_")]
    public |= {f"langchain {n}" for n in store_methods}
    public |= {"langchain retriever", "llamaindex retriever", "evaluate"}
    assert llamaindex.VectorsyncRetriever
    missing = {name for name in public if name not in rows and name not in NOT_DOORS}
    assert not missing, f"public entry points with no row in tenancy_doors.py or NOT_DOORS: {sorted(missing)}"
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    cli_rows = {name.split(" ")[1] for name in table if name.startswith("cli ")}
    unlisted = set(commands) - cli_rows - NOT_CLI_DOORS
    assert not unlisted, f"CLI commands with no row in tenancy_doors.py or NOT_CLI_DOORS: {sorted(unlisted)}"
