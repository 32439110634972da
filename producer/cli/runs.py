"""``vectorsync runs resume RUN``: continue a run paused at its budget, with higher caps; ``vectorsync runs cancel
RUN``: end a run, its batch-lane jobs cancelled at the provider."""

from __future__ import annotations

from typing import Annotated

import typer

from producer.cli.console import guarded, open_producer, out
from producer.cli.group import Group
from producer.cli.safe_text import printable

__all__ = ["cancel", "resume", "runs_app"]

runs_app = typer.Typer(help="Act on runs: resume a paused one, cancel one.", no_args_is_help=True, cls=Group)


@runs_app.command()
def resume(
    run: Annotated[str, typer.Argument(help="a paused run's id, or its first characters")],
    max_tokens: Annotated[int | None, typer.Option(min=1, help="the run's new cap in tokens")] = None,
    max_cost: Annotated[float | None, typer.Option(min=0, help="the run's new cap in cost")] = None,
) -> None:
    """Resume a paused run: its parked batches go out again under the new caps (unchanged caps when omitted)."""
    producer = open_producer()

    def resumed() -> tuple[str, int]:
        run_id = producer.ledger.resolve_run(run)
        return run_id, producer.resume(run_id, max_tokens=max_tokens, max_cost=max_cost)

    run_id, sent = guarded(resumed)
    out.print(f"run {printable(run_id)} resumed: {sent} parked batches sent again", highlight=False)


@runs_app.command()
def cancel(run: Annotated[str, typer.Argument(help="a run's id, or its first characters")]) -> None:
    """Cancel a run: it ends failed, and its batch-lane jobs are cancelled at the provider (what they did is kept)."""
    producer = open_producer()

    def cancelled() -> str:
        run_id = producer.ledger.resolve_run(run)
        producer.cancel(run_id)
        return run_id

    run_id = guarded(cancelled)
    out.print(f"run {printable(run_id)} cancelled", highlight=False)
