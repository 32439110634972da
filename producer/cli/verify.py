"""``vectorsync verify COLLECTION [--sample N] [--repair] [--json]``: the ledger compared with what the store holds,
record by record; exit 1 when anything drifted, 0 when clean, 2 on bad input, 3 when a part it needs (the state
database, the store, the source, the broker) cannot be reached: nothing is lost then, and it can simply run again.

Chunk texts are compared with what the source's records make, read as a worker reads them
(``worker.repair.chunk_reading``), imported inside the command alone, so ``import producer`` stays light.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any

import typer

from producer.cli.console import error, guarded, say, where
from producer.cli.safe_text import printable
from store.errors import StoreUnavailable

if TYPE_CHECKING:
    from store.client import Client
    from store.verify import Report

__all__ = ["UNREACHABLE", "render", "to_json", "verify"]

#: The exit code when a part verify needs cannot be reached: not bad input (2), and worth running again.
UNREACHABLE = 3


def verify(
    collection: Annotated[str, typer.Argument(help="the collection (or a generation, NAME__gN)")],
    sample: Annotated[int | None, typer.Option("--sample", "-n", help="check N records drawn at random")] = None,
    repair: Annotated[
        bool, typer.Option("--repair", help="re-index drifted records, send orphans' ids, recount statistics")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="the report in full, as JSON")] = False,
) -> None:
    """Compare the ledger with what the store holds: chunks, texts, vectors, orphans, keyword statistics."""
    from store.process.defaults import default_client

    client = guarded(default_client)
    report = guarded(lambda: reached(lambda: read(client, collection, sample=sample, repair=repair)))
    if as_json:
        print(to_json(report))
    else:
        render(report)
    if not report.clean:
        raise typer.Exit(1)


def read(client: Client, collection: str, *, sample: int | None, repair: bool) -> Report:
    """The report of ``collection``, its source read as a worker reads it."""
    from store.explain.gather import declared
    from worker.repair.chunk_reading import ChunkReading

    declared(client.settings, collection)  # an unknown collection is refused before any part is opened
    with ChunkReading(client) as reading:
        return client.verify(collection, sample=sample, source=reading, repair=repair)


def reached(action: Callable[[], Report]) -> Report:
    """``action()``; a part it cannot reach (StoreUnavailable, BrokerUnavailable) is one line and exit 3, not bad
    input: verify loses nothing to one (``store.verify.scan``), so it can run again. Other errors go on to
    ``guarded`` (exit 2)."""
    try:
        return action()
    except StoreUnavailable as exc:
        error(str(exc))
        raise typer.Exit(UNREACHABLE) from None


def _summary(report: Report) -> str:
    place = report.place or f"a {report.backend} store"
    checked = f"a sample of {report.records} records" if report.sample is not None else f"{report.records} records"
    return (
        f"{printable(report.collection)} ({where(report.collection, report.generation, place)}): "
        f"{checked}, {report.chunks} chunks compared in {report.seconds:.1f} s"
    )


def _findings(report: Report) -> list[str]:
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(report.kinds.items()))
    lines = [
        f"drifted  {report.drifted} records" + (f" ({kinds})" if kinds else ""),
        f"orphans  {report.orphan_records} records' {report.orphan_chunks} chunks no ledger entry accounts for",
        f"keywords {report.keyword_terms} terms differ from a recount",
    ]
    if report.stale:
        lines.append(f"stale    {report.stale} records changed in the source since indexed (not drift: reconcile)")
    return lines


def render(report: Report) -> None:
    """The summary, the first drifted records with what differs, the notes, and what a repair did."""
    say(_summary(report))
    for line in _findings(report):
        say(line)
    for drift in report.first:
        say(f"  {printable(drift.record_id)}: " + "; ".join(printable(detail) for detail in drift.details))
    if len(report.first) < report.drifted + report.orphan_records:
        say(f"  ... and {report.drifted + report.orphan_records - len(report.first)} more (--json shows the first)")
    for note in report.notes:
        say(f"note: {printable(note)}")
    fixed = report.repair
    if fixed is not None:
        say(
            f"repaired: {fixed.reindexed} records forgotten by the ledger and sent to be indexed again, "
            f"{fixed.orphans_sent} orphans' record ids sent (a record the source no longer has is deleted), "
            f"in {fixed.batches} index_batch tasks; {fixed.recounted} keyword terms recounted"
        )
        for line in fixed.left:
            say(f"left: {printable(line)}")
    if report.clean:
        say("clean")
    elif fixed is None:
        say(f"drifted: `vectorsync verify {printable(report.collection)} --repair` fixes it")


def to_json(report: Report) -> str:
    """The report in full, and whether it is clean."""
    data: dict[str, Any] = asdict(report)
    data["clean"] = report.clean
    return json.dumps(data, default=str, indent=2)
