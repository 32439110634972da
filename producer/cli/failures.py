"""``vectorsync failures``: the records that failed to index, and with ``--retry`` enqueue them again.

Pushed collections are not replayed: their content came from the app, so only a new ``index_document`` can.
"""

from __future__ import annotations

from typing import Annotated

import typer

from producer.cli.console import errors, guarded, open_producer, out, short
from producer.cli.safe_text import cell
from producer.cli.tables import Column, show

__all__ = ["failures"]


def failures(
    collection: Annotated[str | None, typer.Option("--collection")] = None,
    retry: Annotated[bool, typer.Option("--retry", help="enqueue every failed record again")] = False,
) -> None:
    """List records that failed to index; --retry enqueues them again."""
    producer = open_producer()
    found = guarded(lambda: producer.ledger.failures(collection))
    if not found:
        where = f" in {cell(collection)}" if collection is not None else ""
        out.print(f"no failed records{where}: nothing to retry" if retry else f"no failed records{where}")
        return
    columns = [Column("collection"), Column("record", whole=True), Column("attempts", whole=True)]
    rows = [
        (f.collection, f.record_id, str(f.attempts), f.last_seen.strftime("%Y-%m-%d %H:%M:%S"), short(f.error, 100))
        for f in found
    ]
    show(out, [*columns, Column("last seen"), Column("error")], rows, empty="no failed records")
    if retry:
        sent = pushed = 0
        for f in found:
            config = producer.settings.collections.get(f.collection)
            if config is not None and config.source.kind == "push":
                pushed += 1  # the content is the app's: only a new index_document can replay it
                continue
            with errors():
                sent += producer.index_record(f.collection, f.record_id)
        out.print(f"enqueued {sent} failed records again")
        if pushed:
            out.print(f"{pushed} failed records belong to pushed collections: send them again with index_document")
