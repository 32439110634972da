"""``vectorsync ask NAME QUESTION``: a grounded answer with its numbered sources, or why there is none (exit 2)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from producer.cli.console import guarded, say, short
from producer.cli.safe_text import printable
from producer.cli.search import MODE_HELP, parse_filter, parse_mode

__all__ = ["ask"]


def ask(
    collection: str,
    question: str,
    filter: Annotated[str | None, typer.Option("--filter", "-f", help='JSON, e.g. {"owner_id": 7}')] = None,
    as_json: Annotated[bool, typer.Option("--json", help="the answer and its sources as JSON")] = False,
    mode: Annotated[str | None, typer.Option("--mode", "-m", help=MODE_HELP)] = None,
) -> None:
    """Answer a question from a collection's passages, citing them; exit 2 when they do not hold the answer."""
    from dataclasses import asdict

    from store.query import answer

    grounded = guarded(lambda: answer(collection, question, filter=parse_filter(filter), mode=parse_mode(mode)))
    if as_json:
        print(json.dumps(asdict(grounded), indent=2, default=str))
    elif grounded.answered:
        say(printable(grounded.answer, lines=True))  # a model's prose: its paragraphs kept
        for source in grounded.sources:
            say(f"[{source.number}] {printable(source.record_id)} ({source.score:.2f}): {short(source.excerpt, 160)}")
    else:
        say(f"not answered: {printable(grounded.reason)}")
    if not grounded.answered:
        raise typer.Exit(2)
