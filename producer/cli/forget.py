"""``vectorsync forget COLLECTION ID... [--yes] [--json]``: erase records from everything vectorsync keeps, and
print a receipt of each place looked in (``store.erasure.receipt``)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated

import typer

from producer.cli.console import confirmed, guarded, out, say
from producer.cli.safe_text import printable
from producer.cli.tables import Column, show

__all__ = ["forget"]


def forget(
    collection: Annotated[str, typer.Argument(help="the collection")],
    ids: Annotated[list[str], typer.Argument(metavar="ID...", help="the records' ids")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask (needed when stdin is not a terminal)")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="the receipt as JSON")] = False,
) -> None:
    """Erase records: chunks, keyword statistics, cached vectors, ledger entries, failures, kept pushes."""
    from store.erasure.receipt import forget as erase_records
    from store.process.defaults import default_client

    client = guarded(default_client)
    confirmed(
        f"Erase {len(ids)} record(s) of {collection!r} from the store, the cache and the ledger?",
        action=f"forgetting records of {collection!r}",
        yes=yes,
    )
    receipt = guarded(lambda: erase_records(client, collection, ids))
    if as_json:
        print(json.dumps(asdict(receipt), ensure_ascii=True))
        return
    say(f"forgot {len(receipt.record_ids)} record(s) of {printable(collection)}")
    counts = [Column(header, whole=True, right=True) for header in ("held", "removed")]
    rows = [(place.place, str(place.held), str(place.removed), place.note) for place in receipt.places]
    show(out, [Column("place"), *counts, Column("note")], rows, empty="no place holds anything of them")
    say("the source is yours: a record still there comes back at the next reindex, so delete it there first")
