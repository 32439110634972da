"""The facts at a glance, written from the saved results: the headline table (a dozen rows judged by
``bench/targets.py``), the bench's own tables and the chaos runs' tables, as Markdown between marker comments
(``<!-- NAME:start -->`` ... ``<!-- NAME:end -->``) in README.md and docs/, and the docs' pictures.
``python -m bench`` runs it at its end; alone:

    .venv/bin/python -m bench.headline            # write the tables and pictures
    .venv/bin/python -m bench.headline --check    # exit 1 naming each table that differs from the results
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path

from bench import reliability
from bench.pictures import SCALE, SEARCH, draw_scale, draw_search, scale_series, search_series
from bench.report import Row, table
from bench.targets import TARGETS, rejudge

__all__ = [
    "PLACES",
    "RESULTS",
    "Line",
    "blocks",
    "headline",
    "load",
    "main",
    "publish",
    "read_block",
    "splice",
    "stale",
    "write",
]

RESULTS = Path("bench/results.json")
#: Where each block goes: file -> the blocks it holds.
PLACES = {
    "README.md": ("headline", "reliability"),
    "docs/benchmarks.md": ("headline", "results", "results-capture", "results-verify", "results-lane"),
    "docs/reliability.md": ("reliability", "reliability-runs"),
}
#: The bench's own tables in docs/benchmarks.md: block -> the sections (``--only`` names) whose rows it shows.
TABLES = {
    "results": ("search", "pipeline", "calls", "local", "transport", "broker"),
    "results-capture": ("capture",),
    "results-verify": ("verify",),
    "results-lane": ("lane", "lane-live"),
}


@dataclass(frozen=True)
class Line:
    """One headline row: the measure, vectorsync's figure, the peer's or the limit's, the target and the verdict."""

    measure: str
    ours: str
    theirs: str
    target: str
    met: bool

    def cells(self) -> str:
        met = "met" if self.met else "**missed**"
        return f"| {self.measure} | {self.ours} | {self.theirs} | {self.target} | {met} |"


def load(path: Path = RESULTS) -> list[Row]:
    """The saved rows, judged by today's targets."""
    return [rejudge(Row(**row)) for row in json.loads(path.read_text())["rows"]]


def _row(rows: list[Row], section: str, name: str, *, exact: bool = False) -> Row:
    found = [r for r in rows if r.section == section and (r.name == name if exact else r.name.startswith(name))]
    if not found:
        raise LookupError(f"no row {section!r} / {name!r} in the results: run its bench section")
    return found[0]


def _seconds(value: float) -> str:
    return f"{value:,.0f} s" if value >= 100 else f"{value:.3g} s"


def _filters(rows: list[Row], section: str, what: str) -> list[Row]:
    found = [r for r in rows if r.section == section and r.name.startswith("filter ") and r.name.endswith(what)]
    if not found:
        raise LookupError(f"no filtered {what} rows in section {section!r}: run the search section")
    return found


def _share(row: Row) -> str:
    return row.name.removeprefix("filter ").split(":")[0]


def _recall(rows: list[Row], size: str) -> Line:
    found = _filters(rows, f"search clustered {size}", "recall@10")
    worst = min(found, key=lambda r: r.value)
    return Line(
        f"Filtered search recall@10, {size} vectors",
        f"{worst.value:.3f}, the worst of {len(found)} filters ({_share(worst)} of the rows)",
        "exact search: 1.000",
        TARGETS["filtered recall"].text(),
        all(r.ok for r in found),
    )


def _latency(rows: list[Row], size: str) -> Line:
    section = f"search clustered {size}"
    found = _filters(rows, section, "p50 / p95")
    worst = max(found, key=lambda r: r.value)
    unfiltered = _row(rows, section, "no filter: p50 / p95", exact=True)
    return Line(
        f"Filtered search p95, {size} vectors",
        f"{worst.value:.1f} ms, the worst of {len(found)} filters ({_share(worst)} of the rows)",
        f"no filter: {unfiltered.value:.1f} ms",
        worst.target,
        all(r.ok for r in found),
    )


def _limit(rows: list[Row], records: str) -> Line:
    section = f"scale {records}"
    ratio = _row(rows, section, "first index of")
    first, limit = _row(rows, section, "first index", exact=True), _row(rows, section, "limit", exact=True)
    return Line(
        f"First index until searchable, {records} records, against the limit",
        f"{ratio.value:.3f}x ({_seconds(first.value)})",
        f"{_seconds(limit.value)}: raw binary COPY + the same index builds",
        ratio.target,
        bool(ratio.ok),
    )


def _peer(rows: list[Row]) -> Line:
    """Against LangChain's ``index()``: records a second, and records per CPU second, in one line."""
    figures = []
    for per in ("records/s", "records per CPU second"):
        ratio = _row(rows, "first index", f"vectorsync / LangChain, {per}:")
        match = re.match(r"([\d,]+) against ([\d,]+) ", ratio.detail)
        if match is None:
            raise LookupError(f"the peer row's detail names no records per second: {ratio.detail!r}")
        figures.append((per, ratio, *match.groups()))
    records = re.search(r"first index of ([\d,]+) records", figures[0][1].name)
    return Line(
        f"First index of {records.group(1) if records else 'the'} records against LangChain's `index()` + "
        "`PGVector`: records/s, and records per CPU second",
        "; ".join(f"{ratio.value:.2f}x: {ours} {per}" for per, ratio, ours, _ in figures),
        "; ".join(f"{theirs} {per}" for per, _, _, theirs in figures),
        figures[0][1].target,
        all(bool(ratio.ok) for _, ratio, _, _ in figures),
    )


def _lane(rows: list[Row]) -> Line:
    ratio = _row(rows, "lane", "first load, ")
    current = _row(rows, "lane", "batch lane: every record current", exact=True)
    off = _row(rows, "lane", "batch lane: chunks lost / duplicated", exact=True)
    records = re.search(r"first load, ([\d,]+) records", ratio.name)
    return Line(
        f"The batch lane (`reindex --batch`): a first load of {records.group(1) if records else 'the'} records, "
        "its bill against the synchronous lane's",
        f"{ratio.ratio or 0.0:.3f}x the cost, the same tokens; lost / duplicated {off.value:.0f}, every record current",
        "the declared prices' ratio: 0.5x",
        ratio.target,
        bool(ratio.ok and current.ok and off.ok),
    )


def _live(rows: list[Row]) -> Line:
    live = _row(rows, "live", "index_record enqueue-to-searchable")
    backlog = re.search(r"under an? ([\d,]+-record reindex)", live.name)
    return Line(
        f"A live `index_record`, enqueued to searchable, under a {backlog.group(1) if backlog else 'reindex'}: p95",
        f"{live.value:.2f} s",
        "—",
        live.target,
        bool(live.ok),
    )


def _freshness(rows: list[Row]) -> Line:
    polled = _row(rows, "capture", "commit-to-searchable, NOTIFY off")
    notify = _row(rows, "capture", "commit-to-searchable, NOTIFY on")
    return Line(
        "Change capture: an `UPDATE`'s commit to searchable, p95",
        f"{polled.value:.2f} s (NOTIFY on: {notify.value:.3f} s)",
        "—",
        polled.target,
        bool(polled.ok and notify.ok),
    )


def _calls(rows: list[Row]) -> Line:
    found = [r for r in rows if r.measure == "provider calls against the ideal"]
    first = _row(rows, "provider calls", "first load")
    ideal = re.match(r"ideal ([\d,]+)", first.detail)
    return Line(
        f"Provider calls against the ideal `ceil(chunks to embed / batch size)`, {len(found)} runs",
        f"{max(r.ratio or 0.0 for r in found):.2f}x at worst; {first.value:,.0f} calls ({first.name})",
        f"ideal {ideal.group(1) if ideal else '?'} ({first.name})",
        TARGETS["provider calls against the ideal"].text(),
        all(r.ok for r in found),
    )


def _bill(rows: list[Row]) -> Line:
    found = [r for r in rows if r.measure == "plan against its run"]
    return Line(
        "The bill: `--plan` against the run (records, calls, tokens)",
        f"{sum(bool(r.ok) for r in found)} of {len(found)} plans equal to their runs",
        "the provider's own count",
        TARGETS["plan against its run"].text(),
        bool(found) and all(r.ok for r in found),
    )


def _verify(rows: list[Row]) -> Line:
    big, small = "verify 1,000,000 chunks", "verify 100,000 chunks"
    growth = _row(rows, "verify", "full verify peak RSS,")
    return Line(
        "`vectorsync verify` of 1,000,000 chunks: time, peak memory",
        f"{_seconds(_row(rows, big, 'full verify: time').value)}, "
        f"{_row(rows, big, 'full verify: peak RSS').value:.1f} MiB",
        f"100,000 chunks: {_row(rows, small, 'full verify: peak RSS').value:.1f} MiB",
        f"peak memory {growth.target}",
        bool(growth.ok),
    )


def headline(rows: list[Row]) -> list[Line]:
    """The rows a team weighing vectorsync asks first, in the order it asks them."""
    return [
        _recall(rows, "100,000"),
        _recall(rows, "1,000,000"),
        _latency(rows, "1,000,000"),
        _limit(rows, "20,000"),
        _limit(rows, "1,000,000"),
        _peer(rows),
        _live(rows),
        _freshness(rows),
        _calls(rows),
        _bill(rows),
        _lane(rows),
        _verify(rows),
    ]


def blocks(rows: list[Row], runs: Path = reliability.RUNS) -> dict[str, str]:
    """Every block's Markdown, by name."""
    lines = headline(rows)
    head = "| measure | vectorsync | peer or limit | target | met |\n|---|---|---|---|---|\n"
    chaos, settle = reliability.load(runs)
    out = {
        "headline": head + "\n".join(line.cells() for line in lines),
        "reliability": reliability.short_table(chaos, settle),
        "reliability-runs": reliability.full_table(chaos, settle),
    }
    for name, parts in TABLES.items():
        out[name] = table([r for r in rows if r.part in parts])
    return out


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def read_block(text: str, name: str) -> str:
    """The Markdown between ``name``'s markers in ``text``."""
    start, end = _markers(name)
    if start not in text or end not in text.split(start, 1)[1]:
        raise LookupError(f"no {start} ... {end} in the file: add the two lines where the table goes")
    return text.split(start, 1)[1].split(end, 1)[0].strip("\n")


def splice(text: str, name: str, body: str) -> str:
    """``text`` with ``body`` between ``name``'s markers, set off by blank lines."""
    start, end = _markers(name)
    read_block(text, name)  # both markers are there
    head, rest = text.split(start, 1)
    return f"{head}{start}\n\n{body}\n\n{end}{rest.split(end, 1)[1]}"


def stale(root: Path, rendered: dict[str, str]) -> list[str]:
    """``file: block`` for each block whose table differs from ``rendered``."""
    return [
        f"{file}: {name}"
        for file, names in PLACES.items()
        for name in names
        if read_block((root / file).read_text(), name) != rendered[name]
    ]


def write(root: Path, rendered: dict[str, str]) -> list[str]:
    """Write every block into its files; the files changed."""
    changed = []
    for file, names in PLACES.items():
        path = root / file
        text = original = path.read_text()
        for name in names:
            text = splice(text, name, rendered[name])
        if text != original:
            path.write_text(text)
            changed.append(file)
    return changed


def publish(results: Path = RESULTS, root: Path = Path()) -> None:
    """The tables and the pictures, from ``results``."""
    rows = load(results)
    for file in write(root, blocks(rows)):
        print(f"-- headline: wrote {file}", flush=True)
    draw_scale(scale_series(rows), root / SCALE)
    draw_search(search_series(rows), root / SEARCH)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.headline", description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="the saved results")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a table differs")
    args = parser.parse_args()
    if args.check:
        if differing := stale(Path(), blocks(load(args.results))):
            raise SystemExit("these tables differ from the results: " + ", ".join(differing))
        return
    publish(args.results)


if __name__ == "__main__":
    main()
