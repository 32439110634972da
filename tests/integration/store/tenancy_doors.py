"""Every public door to a collection's records, tried against a tenant-scoped collection by a process whose
settings omit the collection's required filter (``test_tenancy_doors.py`` runs it as ``python -m``).

Each door is tried as a caller outside tenant 1 would try it: unscoped, or by another tenant's id. A door
passes when it refuses (a ConfigError, or a CLI exit that is not 0) or answers without tenant 2's text. The
output is one JSON object: door -> "refused", "answered" or "LEAKED: ..." (with what came back).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The text only tenant 2's record holds: no door may return it to this process.
SECRET = "rubyfjord"
#: Tenant 1's filter: a scoped door is also tried with it and must answer without tenant 2's text.
SCOPED = {"tenant": 1}

Door = Callable[[Any], object]


def _client_doors() -> dict[str, Door]:
    from store import Filter

    return {
        "Collection.search": lambda c: c.get_collection("notes").search(SECRET),
        "Collection.search scoped": lambda c: c.get_collection("notes").search(SECRET, filter=Filter.eq("tenant", 1)),
        "Collection.count": lambda c: c.get_collection("notes").count(),
        "Client.search": lambda c: c.search("notes", SECRET),
        "Client.search scoped": lambda c: c.search("notes", SECRET, filter=SCOPED),
        "Client.search keyword": lambda c: c.search("notes", SECRET, mode="keyword"),
        "Client.asearch": lambda c: asyncio.run(c.asearch("notes", SECRET)),
        "Client.answer": lambda c: c.answer("notes", f"what is {SECRET}?"),
        "Client.explain": lambda c: c.explain("notes", "b"),
        "Client.explain scoped": lambda c: c.explain("notes", "b", filter=SCOPED),
    }


def _query_doors() -> dict[str, Door]:
    import store.query as query

    return {
        "query.search": lambda c: query.search("notes", SECRET, store=c.store),
        "query.asearch": lambda c: asyncio.run(query.asearch("notes", SECRET, store=c.store)),
        "query.answer": lambda c: query.answer("notes", f"what is {SECRET}?", retrieval=c.retrieval),
        "query.aanswer": lambda c: asyncio.run(query.aanswer("notes", f"what is {SECRET}?", retrieval=c.retrieval)),
        "query.open_collection": lambda c: query.open_collection(c.store, "notes").search(SECRET),
        "evaluate": lambda c: _evaluate(c),
    }


def _adapter_doors() -> dict[str, Door]:
    from langchain_core.documents import Document

    from store.adapters.langchain import VectorsyncRetriever, VectorsyncVectorStore
    from store.adapters.llamaindex import VectorsyncRetriever as LlamaRetriever

    def lc(c: Any, **scope: Any) -> VectorsyncVectorStore:
        return VectorsyncVectorStore(collection="notes", client=c, **scope)

    return {
        "langchain similarity_search": lambda c: lc(c).similarity_search(SECRET),
        "langchain similarity_search_with_score": lambda c: lc(c).similarity_search_with_score(SECRET),
        "langchain similarity_search_by_vector": lambda c: lc(c).similarity_search_by_vector([1.0] * 8),
        "langchain get_by_ids": lambda c: lc(c).get_by_ids(["b"]),
        "langchain get_by_ids scoped": lambda c: lc(c, filter=SCOPED).get_by_ids(["b"]),
        "langchain delete": lambda c: lc(c).delete(["b"]),
        "langchain delete scoped": lambda c: lc(c, filter=SCOPED).delete(["b"]),
        "langchain add_documents": lambda c: lc(c).add_documents([Document("x", metadata={"tenant": 2})], ids=["b"]),
        "langchain add_documents scoped": lambda c: lc(c, filter=SCOPED).add_documents(
            [Document("x", metadata={"tenant": 2})], ids=["b"]
        ),
        "langchain retriever": lambda c: VectorsyncRetriever(collection="notes", client=c).invoke(SECRET),
        "llamaindex retriever": lambda c: LlamaRetriever("notes", client=c).retrieve(SECRET),
    }


def _cli_doors(folder: Path) -> dict[str, Door]:
    queries = folder / "queries.jsonl"
    queries.write_text(json.dumps({"query": SECRET, "relevant": ["b"]}) + "\n")
    return {
        "cli search": lambda c: _cli("search", "notes", SECRET),
        "cli search --json": lambda c: _cli("search", "notes", SECRET, "--json"),
        "cli ask": lambda c: _cli("ask", "notes", f"what is {SECRET}?"),
        "cli explain": lambda c: _cli("explain", "notes", "b"),
        "cli explain scoped": lambda c: _cli("explain", "notes", "b", "--filter", json.dumps(SCOPED)),
        "cli explain --json": lambda c: _cli("explain", "notes", "b", "--json"),
        "cli eval": lambda c: _cli("eval", "notes", str(queries)),
    }


def doors(folder: Path) -> dict[str, Door]:
    """Every door, by name: the table ``test_tenancy_doors`` checks is complete."""
    return {**_client_doors(), **_query_doors(), **_adapter_doors(), **_cli_doors(folder)}


def _evaluate(client: Any) -> object:
    from store.evaluation import evaluate, parse_queries

    return evaluate("notes", parse_queries([json.dumps({"query": SECRET, "relevant": ["b"]})]), client=client)


def _cli(*args: str) -> object:
    """The CLI in this process; a non-zero exit is a refusal (``SystemExit``), its output kept to be searched."""
    from typer.testing import CliRunner

    from producer.cli.app import app

    result = CliRunner().invoke(app, list(args))
    if result.exit_code != 0:
        raise _Refused(result.output)
    return result.output


class _Refused(Exception):
    """A CLI door that exited non-zero: its output still must not hold the secret."""


def _try(door: Door, client: Any) -> str:
    from store.errors import ConfigError

    try:
        answer = door(client)
    except (ConfigError, _Refused) as exc:
        return f"LEAKED in its refusal: {exc}" if SECRET in str(exc) else "refused"
    shown = repr(answer)
    with contextlib.suppress(TypeError, ValueError):
        shown += json.dumps(answer, default=repr)
    return f"LEAKED: {shown[:300]}" if SECRET in shown else "answered"


def main() -> None:
    from store.client import Client

    folder = Path(sys.argv[1])
    client = Client.from_settings()
    results = {}
    for name, door in doors(folder).items():
        with contextlib.redirect_stdout(io.StringIO()):
            results[name] = _try(door, client)
    client.close()
    print(json.dumps(results))


if __name__ == "__main__":
    os.environ.setdefault("VECTORSYNC_LOG_LEVEL", "WARNING")
    main()
