"""``vectorsync eval NAME --queries FILE``: a collection's retrieval quality per search mode, from labelled queries.

The queries file is checked whole first (``store.evaluation.queries``): a bad line stops the command
before any search runs. The searches read the collection's live generation, as ``vectorsync search`` does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer
from rich.table import Table

from producer.cli.console import err, guarded, out, say
from producer.cli.safe_text import printable

if TYPE_CHECKING:
    from store.vectors import SearchMode

__all__ = ["evaluate"]


def default_modes(collection: str) -> str:
    """Every mode when the collection keeps a keyword index; else vector alone (keyword and hybrid would be
    refused), said on stderr."""
    from store.settings import load_settings

    config = guarded(load_settings).collections.get(collection)
    if config is None or config.search.keeps_keywords:
        return "vector,keyword,hybrid"
    err.print(
        f"{printable(collection)} keeps no keyword index (search.keywords): evaluating vector search alone",
        highlight=False,
    )
    return "vector"


def evaluate(
    collection: str,
    queries: Annotated[Path, typer.Option("--queries", "-q", help="JSON Lines: {query, relevant, filter}")],
    modes: Annotated[
        str | None,
        typer.Option(
            "--modes", "-m", help="search modes, comma-separated (default: every mode the collection can search by)"
        ),
    ] = None,
    k: Annotated[int, typer.Option("--k", "-k", help="records each metric reads")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="the report, every query's scores included, as JSON")] = False,
) -> None:
    """Score a collection's search against labelled queries: recall@k, MRR@k, nDCG@k, p50/p95 per mode."""
    from store.evaluation import evaluate as run
    from store.evaluation import load_queries

    labelled = guarded(lambda: load_queries(queries))
    named = modes if modes is not None else default_modes(collection)
    chosen = cast("list[SearchMode]", [m.strip() for m in named.split(",")])  # evaluate checks each
    report = guarded(lambda: run(collection, labelled, modes=chosen, k=k))
    if as_json:
        print(json.dumps(report.as_dict(), indent=2))
        return
    table = Table(
        "mode",
        "queries",
        f"recall@{k}",
        f"MRR@{k}",
        f"nDCG@{k}",
        "p50 ms",
        "p95 ms",
        title=f"{printable(collection)}: {len(labelled)} queries from {printable(queries.name)}",
    )
    for row in report.modes:
        table.add_row(
            row.mode,
            str(row.queries),
            f"{row.recall:.3f}",
            f"{row.mrr:.3f}",
            f"{row.ndcg:.3f}",
            f"{row.p50_ms:.1f}",
            f"{row.p95_ms:.1f}",
        )
    out.print(table)
    say(
        "recall: share of the relevant records in the first k; MRR: 1/rank of the first; nDCG: rank-discounted "
        "gain over the ideal (docs/evaluation.md)"
    )
