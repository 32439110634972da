"""The docs' pictures, drawn from saved rows (``bench/results.json``): each phase's cost per record as the
collection grows (``docs/img/scale.png``), and filtered search's recall and p95 by selectivity
(``docs/img/filtered-search.png``). matplotlib is the dev extra's; nothing else of the bench needs it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bench.report import Row
from bench.scale_figures import EDITS, PHASES
from bench.targets import TARGETS

__all__ = ["SCALE", "SEARCH", "draw_scale", "draw_search", "scale_series", "search_series"]

SCALE = Path("docs/img/scale.png")
SEARCH = Path("docs/img/filtered-search.png")
#: What the scale picture's "limit" is, on the picture itself.
LIMIT = "limit: a raw binary COPY of the same final rows + the same index builds, nothing of vectorsync timed"
#: What the search picture's lines mean where they reach 1.0, on the picture itself.
EXACT = (
    "recall against an exact search of the same rows; a filter matching at most vectors.exact_search_rows "
    "(10,000) rows is searched exactly"
)
#: Filter share of the rows -> its fraction, in the order drawn (the x axis runs from broad to narrow).
SELECTIVITIES = {"100%": 1.0, "10%": 0.1, "1%": 0.01, "0.1%": 0.001, "0.01%": 0.0001}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def scale_series(rows: list[Row]) -> dict[str, list[tuple[int, float]]]:
    """Phase -> [(records, microseconds per record)] from the ``scale N`` rows (edits: per edited record)."""
    series: dict[str, list[tuple[int, float]]] = {phase: [] for phase in PHASES}
    for row in rows:
        size = re.fullmatch(r"scale ([\d,]+)", row.section)
        if size is None or row.name not in series:
            continue
        records = int(size.group(1).replace(",", ""))
        over = max(1, records // 100) if row.name in EDITS else records
        series[row.name].append((records, row.value / over * 1e6))
    return {phase: sorted(points) for phase, points in series.items() if points}


def draw_scale(series: dict[str, list[tuple[int, float]]], path: Path = SCALE) -> None:
    """Per-record cost of each phase against records, log axes, the legend beside the data, to ``path`` (PNG)."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(9.5, 4.8), dpi=120)
    for phase, points in series.items():
        label = phase + (" (per edited record)" if phase in EDITS else "")
        style = {"color": "black", "linestyle": "--"} if phase == "limit" else {}
        axes.plot(*zip(*points, strict=True), marker="o", label=label, **style)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("records")
    axes.set_ylabel("microseconds per record")
    axes.set_title("vectorsync: each phase's cost per record as the collection grows")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    figure.text(0.01, 0.01, LIMIT, fontsize=8, ha="left", va="bottom")
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    _save(figure, path, plt)


def search_series(rows: list[Row]) -> dict[str, dict[str, tuple[float, float]]]:
    """Collection (``clustered 100,000``) -> filter share -> (recall@10, p95 ms), from the ``search`` rows."""
    found: dict[str, dict[str, dict[str, float]]] = {}
    for row in rows:
        match = re.fullmatch(r"filter ([\d.]+%): (recall@10|p50 / p95)", row.name)
        if not row.section.startswith("search ") or match is None:
            continue
        share, what = match.groups()
        found.setdefault(row.section.removeprefix("search "), {}).setdefault(share, {})[what] = row.value
    return {
        collection: {
            share: (figures["recall@10"], figures["p50 / p95"])
            for share in SELECTIVITIES
            if {"recall@10", "p50 / p95"} <= set(figures := by_share.get(share, {}))
        }
        for collection, by_share in found.items()
    }


def draw_search(series: dict[str, dict[str, tuple[float, float]]], path: Path = SEARCH) -> None:
    """Recall@10 and p95 of filtered search against the filter's share of the rows, a line per collection, the
    targets dashed, to ``path`` (PNG)."""
    plt = _pyplot()
    figure, (recall, latency) = plt.subplots(1, 2, figsize=(10, 4.6), dpi=120)
    for collection, points in series.items():
        shares = [SELECTIVITIES[share] for share in points]
        recall.plot(shares, [r for r, _ in points.values()], marker="o", label=f"{collection} vectors")
        latency.plot(shares, [p for _, p in points.values()], marker="o", label=f"{collection} vectors")
    recall.axhline(TARGETS["filtered recall"].bound, color="grey", linestyle="--", linewidth=1)
    recall.annotate(f"target {TARGETS['filtered recall'].text()}", (1.0, TARGETS["filtered recall"].bound), fontsize=8)
    for measure in ("search p95, up to 100,000 vectors", "search p95, 1,000,000 vectors"):
        bound = TARGETS[measure].bound
        latency.axhline(bound, color="grey", linestyle="--", linewidth=1)
        latency.annotate(
            f"target {measure.removeprefix('search p95, ')}: {TARGETS[measure].text()}",
            (1.0, bound),
            fontsize=8,
            va="bottom",
        )
    for axes, label in ((recall, "recall@10 (against an exact search)"), (latency, "p95 latency, ms")):
        axes.set_xscale("log")
        axes.invert_xaxis()
        axes.set_xlabel("share of the rows the filter keeps")
        axes.set_ylabel(label)
        axes.xaxis.set_major_formatter(plt.FuncFormatter(lambda x, _: f"{x * 100:g}%"))
        axes.grid(True, which="both", alpha=0.3)
    latency.set_ylim(bottom=0)
    recall.set_title("recall@10 by filter")
    latency.set_title("p95 by filter")
    handles, labels = recall.get_legend_handles_labels()
    figure.legend(
        handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.04), ncol=len(labels), fontsize=8, frameon=False
    )
    figure.suptitle("vectorsync: filtered search (HNSW, ef_search 200) by the share of rows a filter keeps")
    figure.text(0.01, 0.01, EXACT, fontsize=8, ha="left", va="bottom")
    figure.tight_layout(rect=(0, 0.1, 1, 1))
    _save(figure, path, plt)


def _save(figure: Any, path: Path, plt: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
