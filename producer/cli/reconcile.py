"""``vectorsync reconcile NAME``: sweep the source against the index, the repair that beat also runs on a schedule."""

from __future__ import annotations

from typing import Annotated

import typer

from producer.cli.console import guarded, open_producer, out
from producer.cli.progress import follow_bulk

__all__ = ["reconcile"]


def reconcile(
    collection: str,
    wait: Annotated[bool, typer.Option(help="follow the sweep until it ends")] = False,
    timeout: Annotated[float | None, typer.Option(help="with --wait, stop following after this many seconds")] = None,
) -> None:
    """Compare the source with what is indexed; index what is missing or stale, drop what is gone."""
    producer = open_producer()
    run_id = guarded(lambda: producer.reconcile(collection))
    out.print(f"reconcile {run_id} started for {collection}", highlight=False)
    if wait and not follow_bulk(producer, run_id, timeout):
        raise typer.Exit(1)
