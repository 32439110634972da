"""``vectorsync eval NAME --queries FILE``: a collection's retrieval quality per search mode, from labelled queries.

The queries file is checked whole first (``store.evaluation.queries``): a bad line stops the command
before any search runs. The searches read the collection's live generation, as ``vectorsync search`` does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from producer.cli.console import err, guarded, out, say
from producer.cli.safe_text import printable
from producer.cli.tables import Column, show

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
    say(f"{printable(collection)}: {len(labelled)} queries from {printable(queries.name)}")
    headers = ("queries", f"recall@{k}", f"MRR@{k}", f"nDCG@{k}", "p50 ms", "p95 ms")
    figures = [_figures(row) for row in report.modes]
    show(out, [Column("mode"), *(Column(h, whole=True, right=True) for h in headers)], figures, empty="no mode ran")
    say(
        "recall: share of the relevant records in the first k; MRR: 1/rank of the first; nDCG: rank-discounted "
        "gain over the ideal (docs/evaluation.md)"
    )


def _figures(row: Any) -> tuple[str, ...]:
    """A mode's row: its queries, recall, MRR and nDCG to 3 places, p50 and p95 to 0.1 ms."""
    scores = (f"{value:.3f}" for value in (row.recall, row.mrr, row.ndcg))
    return (row.mode, str(row.queries), *scores, f"{row.p50_ms:.1f}", f"{row.p95_ms:.1f}")
