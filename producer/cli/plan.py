"""``vectorsync reindex NAME --plan`` and ``migrate NAME --chain NEW --plan``: what the run would do and cost, as a
table or ``--json``, found without calling a provider (``store.plan``). The source is judged as a worker judges it
(``worker.repair.plan_reading``), imported inside the command alone, so ``import producer`` stays light."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING

from rich import box
from rich.table import Table

from producer.cli.console import guarded, out

if TYPE_CHECKING:
    from store.client import Client
    from store.plan import Plan

__all__ = ["Caps", "read", "render", "show", "to_json"]

#: A run's ``--max-tokens`` and ``--max-cost`` (None: not given).
Caps = tuple[int | None, float | None]


def show(collection: str, *, chain: Sequence[str] | None, as_json: bool, caps: Caps = (None, None)) -> None:
    """Make the plan of the run (capped at ``caps``: ``--max-tokens``, ``--max-cost``) and print it."""
    from store.process.defaults import default_client

    client = guarded(default_client)
    plan = guarded(lambda: read(client, collection, chain=chain, caps=caps))
    if as_json:
        print(to_json(plan))
    else:
        render(plan)


def read(client: Client, collection: str, *, chain: Sequence[str] | None, caps: Caps = (None, None)) -> Plan:
    """The plan of ``collection``'s reindex (``chain``: migration), its source read as a worker reads it; a capped
    run's (``caps``) packs each batch's calls alone, as the run will."""
    from store.explain.gather import declared
    from store.plan import plan
    from worker.repair.plan_reading import PlanReading

    declared(client.settings, collection)  # an unknown collection is refused before any part is opened
    with PlanReading(client) as reading:
        return plan(client.settings, client.ledger, collection, reader=reading, chain=chain, caps=caps)


def to_json(plan: Plan) -> str:
    return json.dumps(asdict(plan) | {"records": plan.records}, indent=2)


def _money(plan: Plan) -> str:
    if plan.cost is None:
        return f"no price declared (models.{plan.entry}.price_per_million_tokens)"
    cost = f"{plan.cost:,.2f}" if plan.cost >= 1 else f"{plan.cost:.6f}".rstrip("0").rstrip(".") or "0"
    return f"${cost} at ${plan.price_per_million_tokens:g} per million tokens"


def _batch(plan: Plan) -> str:
    """The batch lane's side of the plan: its cost and its wait."""
    wait = f"the answers within {plan.batch_wait_hours:g} h (the provider's window; often sooner)"
    if plan.batch_cost is None:
        return f"no batch price declared (models.{plan.entry}.batch.price_per_million_tokens); {wait}"
    cost = (
        f"{plan.batch_cost:,.2f}" if plan.batch_cost >= 1 else f"{plan.batch_cost:.6f}".rstrip("0").rstrip(".") or "0"
    )
    return f"${cost} at ${plan.batch_price_per_million_tokens:g} per million tokens; {wait}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "no rate limit declared"
    return f"at least {seconds:,.0f} s under the declared rate limits"


def render(plan: Plan) -> None:
    """The plan as a table: records, chunks, what is bought and what it costs."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_column()
    counted = (
        "counted by the model's tokenizer" if plan.counted_by == "tokenizer" else "estimated (4 characters a token)"
    )
    rows = [
        ("records", plan.records, f"{plan.new:,} new, {plan.changed:,} changed, {plan.unchanged:,} unchanged"),
        ("gone", plan.gone, "in the ledger, not in the source (deleted by a --full reindex)"),
        ("failed", plan.failed, "records a batch would refuse (see vectorsync failures after the run)"),
        ("chunks", plan.chunks, "of the new and changed records"),
        ("reused", plan.reused, "vectors the store holds already"),
        ("cached", plan.cached, "vectors the embedding cache holds"),
        ("to embed", plan.embed, f"distinct texts, by {plan.entry} ({plan.model})"),
        ("tokens", plan.tokens, counted),
        ("calls", plan.calls, "provider calls" + ("" if plan.pooled else ", each batch packing its own")),
    ]
    for name, value, what in rows:
        table.add_row(name, f"{value:,}", what)
    out.print(
        f"{plan.kind} of {plan.collection} (writes {plan.generation}): nothing sent, nothing written", highlight=False
    )
    out.print(table)
    out.print(f"cost      {_money(plan)}", highlight=False)
    out.print(f"duration  {_duration(plan.rate_limited_seconds)}", highlight=False)
    if plan.batch_wait_hours is not None:
        out.print(f"--batch   {_batch(plan)}", highlight=False)
    out.print(f"planned in {plan.seconds:.1f} s", highlight=False)
    for note in plan.notes:
        out.print(f"note: {note}", highlight=False)
