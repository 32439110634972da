"""``python -m tests.reliability.chaos --minutes 30 --seed 7 [--broker redis]``: one chaos run; exit 1 when an
invariant broke. Its folder (the workers' logs, the settings, the broker's AOF) is kept and named at the end."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from tests.reliability.brokers import BROKERS
from tests.reliability.chaos import run

#: The chaos runs the docs' tables show.
RUNS = Path(__file__).with_name("runs.json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.chaos", description=__doc__)
    parser.add_argument("--minutes", type=float, default=30.0, help="how long faults are injected (default 30)")
    parser.add_argument("--seed", type=int, default=7, help="the seed of the fault schedule and the writes")
    parser.add_argument("--folder", type=Path, default=None, help="where logs go (default: a new temporary one)")
    parser.add_argument(
        "--broker",
        choices=BROKERS,
        default="redis",
        help="redis (default), rediss (TLS), sentinel (a master, a replica, a Sentinel) or rabbitmq",
    )
    parser.add_argument(
        "--record",
        metavar="NAME",
        default=None,
        help="keep the run, named NAME, in tests/reliability/chaos/runs.json (the docs' chaos tables: "
        "python -m bench.headline writes them)",
    )
    args = parser.parse_args(argv)
    folder = args.folder or Path(tempfile.mkdtemp(prefix=f"vectorsync-chaos-{args.broker}-{args.seed}-"))
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    def say(line: str) -> None:
        print(line, flush=True)

    report = run(folder, seed=args.seed, seconds=args.minutes * 60, say=say, broker=args.broker)
    say(f"chaos: {time.monotonic() - started:.0f}s in all; logs in {folder}")
    if args.record:
        kept = json.loads(RUNS.read_text())
        kept["runs"].append(report.entry(args.record, args.minutes))
        RUNS.write_text(json.dumps(kept, indent=2) + "\n")
        say(f"chaos: kept as {args.record!r} in {RUNS}; python -m bench.headline writes the docs' tables")
    return 1 if report.broken or report.settled_in is None else 0


if __name__ == "__main__":
    sys.exit(main())
