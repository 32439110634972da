"""``vectorsync index NAME ID...``: enqueue records by id on the live queue, as app code does after a write."""

from __future__ import annotations

from typing import Annotated

import typer

from producer.cli.console import guarded, open_producer, out
from producer.cli.progress import warn_if_no_consumer
from store.contract import LIVE_QUEUE

__all__ = ["index"]


def index(collection: str, ids: Annotated[list[str], typer.Argument(help="record ids")]) -> None:
    """Enqueue records by id (coalesced with ones already queued)."""
    producer = open_producer()
    sent = guarded(lambda: producer.index_records(collection, ids))
    out.print(f"enqueued {sent} of {len(ids)} records for {collection}")
    warn_if_no_consumer(producer, LIVE_QUEUE)
