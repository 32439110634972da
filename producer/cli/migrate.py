"""``vectorsync migrate NAME --chain NEW``: change a collection's embedding model without downtime.

The new generation is built by a run like a reindex; searches keep reading the live one and updates go to
both. When the run is done with no failure, the worker that ends it switches the collection in one step.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from producer.cli.console import error, guarded, open_producer, out, say
from producer.cli.progress import follow_bulk

__all__ = ["migrate"]

#: Seconds ``--wait`` gives the worker to switch once the run reads done (it switches right after counting it).
SWITCH_GRACE = 10.0


def migrate(
    collection: str,
    chain: Annotated[
        str | None, typer.Option(help="the new chain: [models.NAME] names, comma-separated, in failover order")
    ] = None,
    switch: Annotated[
        bool,
        typer.Option("--switch", help="switch to the generation built now, even though some of its records failed"),
    ] = False,
    wait: Annotated[bool, typer.Option(help="follow the run until it ends and the collection switches")] = False,
    timeout: Annotated[float | None, typer.Option(help="with --wait, stop following after this many seconds")] = None,
    plan: Annotated[
        bool, typer.Option("--plan", help="say what the migration would embed and cost, without calling a provider")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="with --plan, the plan as JSON")] = False,
    batch: Annotated[
        bool, typer.Option("--batch", help="buy the embeddings through the new model's batch lane: cheaper, later")
    ] = False,
) -> None:
    """Build a collection under a new embedding chain beside the live one, then switch to it in one step."""
    producer = open_producer()
    registry = guarded(lambda: producer.ledger.generations)
    if switch:
        _switch(producer, collection)
        return
    if not chain:
        error("name the new chain: --chain MODEL[,MODEL...] ([models.NAME] entries)")
        raise typer.Exit(2)
    names = [name.strip() for name in chain.split(",") if name.strip()]
    if plan:
        from producer.cli.plan import show

        show(collection, chain=names, as_json=as_json)
        return
    generation, run_id = guarded(lambda: producer.migrate(collection, names, batch=batch))
    alias = guarded(lambda: registry.alias(collection))
    live = alias.reads.name if alias is not None else f"{collection}__g1"
    out.print(
        f"run {run_id} builds {generation.name} ({', '.join(generation.chain)}, {generation.dimensions} "
        f"dimensions) for {collection}; searches read {live} until it is done, updates go to both",
        highlight=False,
    )
    if not wait:
        return
    if not follow_bulk(producer, run_id, timeout):
        say(
            f"{collection} still reads {live}: fix the failures (vectorsync failures --retry) and run this again, "
            f"or switch anyway (vectorsync migrate {collection} --switch)"
        )
        raise typer.Exit(1)
    deadline = time.monotonic() + SWITCH_GRACE
    while (now := guarded(lambda: registry.alias(collection))) is not None and now.live != generation.number:
        if time.monotonic() > deadline:
            say(
                f"the run is done but {collection} still reads {now.reads.name}: `vectorsync migrate {collection} "
                "--switch` switches it"
            )
            raise typer.Exit(1)
        time.sleep(0.2)
    say(
        f"{collection} now reads {generation.name}; {live} is kept, no longer written, until "
        f"`vectorsync collections drop {live}`"
    )


def _switch(producer: Any, collection: str) -> None:
    switched = guarded(lambda: producer.switch(collection))
    say(f"{collection} now reads {switched.name}")
