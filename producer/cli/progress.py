"""Following a run until it ends: a progress bar on a terminal, a line every few seconds on a pipe."""

from __future__ import annotations

import time
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from producer.cli.console import err, out
from store.ledger import RunProgress, RunStatus

__all__ = ["follow", "summary"]

#: Seconds between progress polls of ``--wait``.
POLL_SECONDS = 0.5
#: Seconds between plain progress lines when the output is not a terminal.
PLAIN_EVERY_SECONDS = 2.0


def follow(producer: Any, run_id: str, timeout: float | None = None) -> RunProgress:
    """Poll the run until it is no longer running; after ``timeout`` seconds exit 3."""
    deadline = None if timeout is None else time.monotonic() + timeout
    if out.is_terminal:
        return _follow_bar(producer, run_id, deadline)
    return _follow_plain(producer, run_id, deadline)


def _give_up(run_id: str, deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        err.print(f"run {run_id} is still running; follow it with `vectorsync status {run_id}`", highlight=False)
        raise typer.Exit(3)


def _follow_bar(producer: Any, run_id: str, deadline: float | None) -> RunProgress:
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
               TextColumn("{task.fields[rate]}"), TimeRemainingColumn(),
               TextColumn("[red]{task.fields[failed]} failed"))
    with Progress(*columns, console=out, transient=False) as bar:
        task = bar.add_task("indexing", total=None, rate="", failed=0)
        start = time.monotonic()
        while True:
            run = producer.reindex_status(run_id)
            rate = run.processed / max(time.monotonic() - start, 1e-6)
            bar.update(task, total=run.total, completed=run.processed, rate=f"{rate:,.0f} rec/s", failed=run.failed)
            if run.status != RunStatus.RUNNING:
                return run  # type: ignore[no-any-return]
            _give_up(run_id, deadline)
            time.sleep(POLL_SECONDS)


def _follow_plain(producer: Any, run_id: str, deadline: float | None) -> RunProgress:
    last_line, last_time = "", 0.0
    while True:
        run = producer.reindex_status(run_id)
        line = (f"run {run_id}: {run.processed}/{run.total if run.total is not None else '?'} "
                f"(done {run.done}, skipped {run.skipped}, failed {run.failed}) {run.status}")
        if line != last_line and (time.monotonic() - last_time >= PLAIN_EVERY_SECONDS or run.status != "running"):
            print(line, flush=True)
            last_line, last_time = line, time.monotonic()
        if run.status != RunStatus.RUNNING:
            return run  # type: ignore[no-any-return]
        _give_up(run_id, deadline)
        time.sleep(POLL_SECONDS)


def summary(run: RunProgress) -> None:
    """One line: how the run ended, its counts and how long it took."""
    took = (run.finished_at - run.started_at).total_seconds() if run.finished_at else 0.0
    colour = "green" if run.status == RunStatus.DONE and not run.failed else "red"
    out.print(f"[{colour}]{run.status}[/{colour}]: {run.total} records, {run.done} indexed, {run.skipped} unchanged, "
              f"{run.failed} failed in {took:.1f}s" + (f" — {run.error}" if run.error else ""), highlight=False)
    if run.failed:
        out.print("see them with `vectorsync failures`; replay with `vectorsync failures --retry`")
