"""``vectorsync explain COLLECTION ID [--json]``: where one record stands, read from every part, and a verdict.

The source is read as a worker reads it (``worker.repair.source_reading``: the same source, the same content hash), the
one place the CLI imports the worker, inside the command, so ``import producer`` stays light.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from producer.cli.console import guarded, out, say, short, styled, where
from producer.cli.safe_text import printable
from producer.cli.search import parse_filter
from producer.cli.tables import Column, show
from store.calls.tokens import estimate_tokens

if TYPE_CHECKING:
    from store.client import Client
    from store.explain import Facts

__all__ = ["explain", "render", "to_json"]

#: Characters of a chunk's or a row's text shown.
TEXT_CHARS = 60
#: Characters of a content hash shown (``--json`` gives them whole).
HASH_CHARS = 12


def explain(
    collection: Annotated[str, typer.Argument(help="the collection (or a generation, NAME__gN)")],
    record_id: Annotated[str, typer.Argument(metavar="ID", help="the record's id")],
    as_json: Annotated[bool, typer.Option("--json", help="every fact, in full, as JSON")] = False,
    filter: Annotated[
        str | None,
        typer.Option("--filter", "-f", help='JSON; a collection with a required filter needs it, e.g. {"tenant": 7}'),
    ] = None,
) -> None:
    """Where one record stands: its source row, hashes, stored chunks, failures and waiting changes; a verdict."""
    from store.process.defaults import default_client

    client = guarded(default_client)
    facts = guarded(lambda: read(client, collection, record_id, parse_filter(filter)))
    if as_json:
        print(to_json(facts))
        return
    render(facts)


def read(client: Client, collection: str, record_id: str, filter: dict[str, Any] | None = None) -> Facts:
    """The facts of one record, its source read as a worker reads it (within ``filter``)."""
    from store.explain.gather import declared
    from worker.repair.source_reading import SourceReading

    declared(client.settings, collection)  # an unknown collection is refused before any part is opened
    with SourceReading(client) as reading:
        return client.explain(collection, record_id, source=reading, filter=filter)


def _hashes(facts: Facts) -> str:
    now = facts.source.hash
    ledger = facts.entry.content_hash if facts.entry is not None and facts.entry.content_hash else None
    shown = f"now {now[:HASH_CHARS] if now else '-'}, ledger {ledger[:HASH_CHARS] if ledger else '-'}"
    if now and ledger:
        return shown + (" (the same)" if now == ledger else " (they differ)")
    return shown


def _source(facts: Facts) -> str:
    found = facts.source.found
    if found is None:
        return f"{facts.source.kind}: not read"
    if not found:
        return f"{facts.source.kind}: gone from the source"
    stamp = f", updated {printable(facts.source.stamp)}" if facts.source.stamp else ""
    return f"{facts.source.kind}: found{stamp}: '{short(facts.source.text, TEXT_CHARS)}'"


def _ledger(facts: Facts) -> str:
    entry = facts.entry
    if entry is None:
        return "no entry"
    written = f"{entry.indexed_at:%Y-%m-%d %H:%M:%S}" if entry.indexed_at else "-"
    return f"{entry.chunks} chunks, model {printable(entry.model or '-')}, version {entry.version}, written {written}"


def _waiting(facts: Facts) -> str:
    if facts.outbox_rows is None:
        outbox = "no capture outbox"
    else:
        since = f" since {facts.outbox_since:%Y-%m-%d %H:%M:%S}" if facts.outbox_since else ""
        outbox = f"{facts.outbox_rows} outbox rows{since}"
    mark = {True: "set", False: "not set", None: "cannot tell"}[facts.queued]
    return f"{outbox}; queued mark {mark}"


def _failure(facts: Facts) -> str:
    failure = facts.failure
    if failure is None:
        return "none"
    return f"{short(failure.error, 100)} ({failure.attempts} attempts, last {failure.last_seen:%Y-%m-%d %H:%M:%S})"


def render(facts: Facts) -> None:
    """The facts as lines, the chunks as a table, then the notes and the verdict; all printed literally."""
    say(
        f"{printable(facts.collection)} {printable(facts.record_id)} "
        f"({where(facts.collection, facts.generation, facts.place or f'a {facts.backend} store')})"
    )
    for label, line in (
        ("source", _source(facts)),
        ("hash", _hashes(facts)),
        ("ledger", _ledger(facts)),
        ("failure", _failure(facts)),
        ("waiting", _waiting(facts)),
    ):
        say(f"{label:<8} {line}")
    if facts.chunks:
        rows = [
            (
                chunk.id,
                f"~{estimate_tokens(chunk.text)}",
                Text(short(chunk.text, TEXT_CHARS)),
                chunk.model or "-",
                f"{chunk.written_at:%Y-%m-%d %H:%M:%S}" if chunk.written_at else "-",
            )
            for chunk in facts.chunks
        ]
        columns = [Column("chunk", whole=True), Column("tokens", whole=True), Column("text"), Column("model")]
        show(out, [*columns, Column("written")], rows, empty="")
    else:
        say("chunks   none stored")
    for note in facts.notes:
        say(f"note: {printable(note)}")
    verdict = facts.verdict
    out.print(
        styled(("verdict:", "bold"), f" {printable(verdict.line)}"), highlight=False, soft_wrap=not out.is_terminal
    )


def to_json(facts: Facts) -> str:
    """The facts in full and the verdict, as JSON; tokens are estimated (4 characters a token)."""
    data: dict[str, Any] = asdict(facts)
    for chunk in data["chunks"]:
        chunk["tokens"] = estimate_tokens(chunk["text"])
    verdict = facts.verdict
    data["verdict"] = {"state": str(verdict.state), "line": verdict.line}
    return json.dumps(data, default=str, indent=2)
