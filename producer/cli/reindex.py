"""``vectorsync reindex NAME``: start a reindex of a whole collection, and with ``--wait`` follow it to its end;
``--max-tokens``/``--max-cost`` cap it (it pauses, and ``vectorsync runs resume`` continues it); ``--batch`` buys its
embeddings through the model's batch lane (``docs/batch-lane.md``)."""

from __future__ import annotations

from typing import Annotated

import typer

from producer.cli.console import guarded, open_producer, out
from producer.cli.progress import follow_bulk

__all__ = ["reindex"]


def reindex(
    collection: str,
    full: Annotated[bool, typer.Option(help="also remove records gone from the source")] = False,
    allow_empty: Annotated[bool, typer.Option(help="with --full, allow emptying the collection")] = False,
    wait: Annotated[bool, typer.Option(help="follow the run until it ends")] = False,
    timeout: Annotated[float | None, typer.Option(help="with --wait, stop following after this many seconds")] = None,
    plan: Annotated[
        bool, typer.Option("--plan", help="say what the run would embed and cost, without calling a provider")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="with --plan, the plan as JSON")] = False,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="pause the run before a call would pass this many tokens")
    ] = None,
    max_cost: Annotated[
        float | None, typer.Option(min=0, help="pause the run before a call would pass this cost (declared prices)")
    ] = None,
    batch: Annotated[
        bool, typer.Option("--batch", help="buy the embeddings through the model's batch lane: cheaper, later")
    ] = False,
) -> None:
    """Reindex a whole collection; --wait shows progress until it ends, --plan what it would cost."""
    if plan:
        from producer.cli.plan import show

        show(collection, chain=None, as_json=as_json, caps=(max_tokens, max_cost))
        return
    producer = open_producer()
    run_id = guarded(
        lambda: producer.reindex_all(
            collection, full=full, allow_empty=allow_empty, max_tokens=max_tokens, max_cost=max_cost, batch=batch
        )
    )
    out.print(f"run {run_id} started for {collection}", highlight=False)
    if wait and not follow_bulk(producer, run_id, timeout):
        raise typer.Exit(1)
