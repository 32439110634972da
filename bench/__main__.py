"""Every benchmark in one run: one table printed, the same rows saved as JSON.

    .venv/bin/python -m bench [--quick] [--only SECTION,...] [--out bench/results.json]

Sections, each measured against its limit in the same run: filtered search
(recall and latency by selectivity, 100,000 and 1,000,000 vectors, and real
text), the bulk pipeline against binary COPY + HNSW build, live latency under
a full bulk queue and peak worker memory, provider calls against the ideal,
the local model against raw encode, the embeddings transport, taking tasks off
Redis (``bench/broker.py``, ours against kombu's transport), what reading
a collection's alias costs a search, retrieval quality per search mode on
labelled sets (``bench/quality.py``), change capture (freshness, a bulk
UPDATE against a reindex, the trigger's cost to writers), HNSW build
parameters (build time, recall and latency per ``hnsw_m`` and
``hnsw_ef_construction``, ``bench/hnsw_sweep.py``), halfvec against vector (build, index size,
recall and latency per ``vectors.precision``, ``bench/precision.py``), ``verify`` on 100,000 and
1,000,000 chunks (time and peak memory, full and sampled, ``bench/verify_scale.py``), the bill (``bench/bill.py``),
the batch lane against the synchronous one (``bench/lane.py``), the whole pipeline at 10,000 to 1,000,000 records
(``bench/scale.py``), indexing against
LangChain's ``index()`` with ``PGVector`` (``bench/peer.py``; its packages:
``scripts/bench-peer``), and how fast the ``vectorsync`` command starts (``bench/cli_start.py``).
Benchmarks are never collected as tests; ``--quick`` is a smoke run of a few minutes. With ``--only``, the
rows of the sections not run are kept from ``--out`` as they were; so are those of a section that cannot run
here (a ConfigError: say, the peer's packages are not installed), which is
named with the reason, and the exit status is then 1. A full run into ``bench/results.json`` ends by writing
the tables and pictures the docs show from it (``bench/headline.py``: README.md and docs/).
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.headline import RESULTS, publish
from bench.report import Row, print_table, write_json
from bench.targets import rejudge
from store.errors import ConfigError

#: Section name -> module with ``run(quick: bool) -> list[Row]``, in the order they run.
SECTIONS = {
    "search": "bench.filtered_search",
    "pipeline": "bench.pipeline",
    "peer": "bench.peer",
    "calls": "bench.provider_calls",
    "local": "bench.local_model",
    "transport": "bench.transport",
    "broker": "bench.broker",
    "aliases": "bench.aliases",
    "quality": "bench.quality",
    "capture": "bench.capture",
    "hnsw": "bench.hnsw_sweep",
    "verify": "bench.verify_scale",
    "bill": "bench.bill",
    "lane": "bench.lane",
    "lane-live": "bench.lane_live",
    "scale": "bench.scale",
    "precision": "bench.precision",
    "cli": "bench.cli_start",
}


def kept(path: Path, ran: list[str]) -> tuple[list[Row], dict[str, Any], dict[str, Any]]:
    """The rows and seconds in ``path`` of the sections not in ``ran`` (judged by today's targets), and its notes
    (other top-level keys)."""
    if not path.exists():
        return [], {}, {}
    previous = json.loads(path.read_text())
    rows = [rejudge(Row(**row)) for row in previous.get("rows", []) if row.get("part") not in ran]
    notes = {k: v for k, v in previous.items() if k not in ("machine", "quick", "seconds", "table", "rows")}
    return rows, {k: v for k, v in previous.get("seconds", {}).items() if k not in ran}, notes


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"sections to run, of {', '.join(SECTIONS)}")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON goes")
    args = parser.parse_args()
    ran = args.only.split(",")
    rows, seconds, notes = kept(args.out, ran) if set(ran) != set(SECTIONS) else ([], {}, {})
    missed = []
    for name in ran:
        start = time.perf_counter()
        try:
            measured = importlib.import_module(SECTIONS[name]).run(quick=args.quick)
        except ConfigError as exc:
            print(f"-- {name}: not run: {exc}", flush=True)
            missed.append(name)
            continue
        rows += [replace(r, part=name) for r in measured]
        seconds[name] = round(time.perf_counter() - start, 1)
        print(f"-- {name}: {seconds[name]} s", flush=True)
    if missed:  # their previous figures stay as they were
        previous, before, _ = kept(args.out, [name for name in SECTIONS if name not in missed])
        rows += previous
        seconds.update(before)
    order = list(SECTIONS)
    rows.sort(key=lambda r: order.index(r.part) if r.part in order else len(order))  # stable within a part
    table = print_table(rows)
    write_json(rows, args.out, quick=args.quick, seconds=seconds, table=table, **notes)
    if args.out == RESULTS and not args.quick:  # a smoke run or another file leaves the docs as they are
        try:
            publish(args.out)
        except LookupError as exc:  # a section the headline reads has no rows yet
            print(f"-- headline: not written: {exc}", flush=True)
    if missed:
        raise SystemExit(f"not run: {', '.join(missed)} (see above)")


if __name__ == "__main__":
    main()
