"""Every benchmark in one run: one table printed, the same rows saved as JSON.

    .venv/bin/python -m bench [--quick] [--only SECTION,...] [--out bench/results.json]

Sections, each measured against its limit in the same run: filtered search
(recall and latency by selectivity, 100,000 and 1,000,000 vectors, and real
text), the bulk pipeline against binary COPY + HNSW build, live latency under
a full bulk queue and peak worker memory, provider calls against the ideal,
the local model against raw encode, the embeddings transport, and what reading
a collection's alias costs a search, and change capture (freshness, a bulk
UPDATE against a reindex, the trigger's cost to writers). Benchmarks
are never collected as tests; ``--quick`` is a smoke run of a few minutes.
"""

from __future__ import annotations

import argparse
import importlib
import time
from pathlib import Path

from bench.report import Row, print_table, write_json

#: Section name -> module with ``run(quick: bool) -> list[Row]``, in the order they run.
SECTIONS = {
    "search": "bench.filtered_search",
    "pipeline": "bench.pipeline",
    "calls": "bench.provider_calls",
    "local": "bench.local_model",
    "transport": "bench.transport",
    "aliases": "bench.aliases",
    "capture": "bench.capture",
}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"sections to run, of {', '.join(SECTIONS)}")
    parser.add_argument("--out", type=Path, default=Path("bench/results.json"), help="where the JSON goes")
    args = parser.parse_args()
    rows: list[Row] = []
    seconds: dict[str, float] = {}
    for name in args.only.split(","):
        start = time.perf_counter()
        rows += importlib.import_module(SECTIONS[name]).run(quick=args.quick)
        seconds[name] = round(time.perf_counter() - start, 1)
        print(f"-- {name}: {seconds[name]} s", flush=True)
    table = print_table(rows)
    write_json(rows, args.out, quick=args.quick, seconds=seconds, table=table)


if __name__ == "__main__":
    main()
