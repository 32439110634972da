"""``vectorsync search NAME QUERY``: the matches of a text query as a table; ``parse_filter`` reads ``--filter``."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from producer.cli.console import err, guarded, out, short, styled
from producer.cli.safe_text import printable
from producer.cli.tables import Column, show

__all__ = ["MODE_HELP", "parse_filter", "parse_mode", "search", "warn_unknown"]

#: ``--mode`` of ``search`` and ``ask``.
MODE_HELP = "vector, keyword (BM25) or hybrid; default: the collection's search.mode"


def search(
    collection: str,
    query: str,
    filter: Annotated[str | None, typer.Option("--filter", "-f", help='JSON, e.g. {"kind": "call"}')] = None,
    limit: Annotated[int, typer.Option("--limit", "-n")] = 10,
    min_score: Annotated[float | None, typer.Option("--min-score")] = None,
    mode: Annotated[str | None, typer.Option("--mode", "-m", help=MODE_HELP)] = None,
) -> None:
    """Search a collection with a text query and an optional metadata filter."""
    from store.query import search as run_search

    def go() -> Any:
        parsed = parse_filter(filter)
        return run_search(collection, query, filter=parsed, limit=limit, min_score=min_score, mode=parse_mode(mode))

    matches = guarded(go)
    # Stored data is printed literally, escaped: "[/b]" or "[link=...]" is text, ESC is shown as \x1b.
    rows = [(f"{m.score:.3f}", m.id, short(m.text, 80), short(json.dumps(m.metadata), 60)) for m in matches]
    columns = [Column("score", whole=True), Column("id", whole=True), Column("text"), Column("metadata")]
    show(out, columns, rows, empty=f"no matches in {collection}")
    if matches.unknown_fields:
        warn_unknown(collection, matches.unknown_fields)


def warn_unknown(collection: str, fields: tuple[str, ...]) -> None:
    """A line on stderr naming the ``--filter`` fields no record of ``collection`` holds (the result is empty)."""
    names = ", ".join(repr(field) for field in fields)
    err.print(
        styled(
            ("warning:", "yellow"),
            f" no record of {printable(collection)} holds {'the field' if len(fields) == 1 else 'the fields'} "
            f"{printable(names)} that --filter names: check the spelling against the metadata a search without "
            "--filter shows",
        ),
        highlight=False,
    )


def parse_mode(text: str | None) -> Any:
    """The ``--mode`` of ``search`` and ``ask``: None (the collection's), or a mode checked by name."""
    from store.vectors.modes import check_mode

    return None if text is None else check_mode(text)


def parse_filter(text: str | None) -> dict[str, Any] | None:
    """The ``--filter`` JSON object of ``search`` and ``ask``; other text is a ConfigError with an example."""
    from store.settings.jsontext import loads

    if text is None:
        return None
    from store.errors import ConfigError

    shown = text if len(text) <= 200 else text[:200] + "..."
    example = '--filter \'{"kind": "call"}\''
    parsed = loads(text, what=f"--filter {shown!r}", example=example)
    if not isinstance(parsed, dict):  # the API's own message speaks of Filter objects, which a shell cannot type
        raise ConfigError(f"--filter {shown!r} is not a JSON object of field conditions; e.g. {example}")
    return parsed
