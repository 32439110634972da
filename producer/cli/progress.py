"""Following a run until it ends: a progress bar on a terminal, a line every few seconds on a pipe."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn
from rich.text import Text

from producer.cli.console import err, guarded, out, styled
from producer.cli.safe_text import printable
from store.broker.queues import consumers_of
from store.contract import BULK_QUEUE, WORKER_COMMAND, RunStatus

if TYPE_CHECKING:
    from store.state.ledger import RunProgress

__all__ = ["BuildLook", "follow", "follow_bulk", "index_builds", "summary", "warn_if_no_consumer"]

#: Seconds between progress polls of ``--wait``.
POLL_SECONDS = 0.5
#: Seconds between plain progress lines when the output is not a terminal.
PLAIN_EVERY_SECONDS = 2.0
#: Seconds into a run before checking that some worker consumes its queue.
NO_CONSUMER_AFTER_SECONDS = 2.0
#: Seconds the workers get to answer that check.
NO_CONSUMER_TIMEOUT = 1.5
#: Seconds between looks at an ``indexing`` run's index build.
BUILD_EVERY_SECONDS = 2.0


def warn_if_no_consumer(producer: Any, queue: str) -> bool:
    """Warn (on stderr) when no worker consumes ``queue``; True when it warned. The work stays queued."""
    try:
        workers = producer.workers(timeout=NO_CONSUMER_TIMEOUT, active=False)
    except Exception:  # the broker went away: the next poll says so
        return False
    if consumers_of(queue, workers):
        return False
    err.print(
        Text(
            f"warning: no worker consumes {queue}: the work waits there until one does. "
            f"Start one with `{WORKER_COMMAND}`"
        )
    )
    return True


def index_builds(settings: Any, runs: list[RunProgress]) -> dict[str, Any]:
    """The index build under way of each ``indexing`` run (its ``BuildProgress``, by run id), read from
    PostgreSQL; what cannot be read is left out."""
    look = BuildLook(settings)
    try:
        return {r.run_id: build for r in runs if (build := look.progress(r)) is not None}
    finally:
        look.close()


class BuildLook:
    """An ``indexing`` run's index build, as PostgreSQL reports it (``store.vectors.pgvector.building``)."""

    def __init__(self, settings: Any) -> None:
        self.settings, self.opened = settings, settings is None
        self.watch: Any = None
        self.last: Any = None
        self.at = 0.0

    def progress(self, run: RunProgress, *, every: float = 0.0) -> Any:
        """The run's build under way (a ``BuildProgress``) or None; looked up at most ``every`` seconds."""
        if run.status != RunStatus.INDEXING:
            return None
        if time.monotonic() - self.at >= every:
            self.at, self.last = time.monotonic(), self._read(run.collection)
        return self.last

    def _read(self, collection: str) -> Any:
        try:
            if not self.opened:
                from store.vectors.backends import build_watch

                self.watch, self.opened = build_watch(self.settings), True
            return None if self.watch is None else self.watch.progress(collection)
        except Exception:  # the progress is a help: the run is followed all the same
            return None

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()


class _Watch:
    """Checks once, a few seconds in, that some worker consumes the queue the run's tasks went to."""

    def __init__(self, producer: Any, queue: str | None) -> None:
        self.producer, self.queue = producer, queue
        self.at = time.monotonic() + NO_CONSUMER_AFTER_SECONDS

    def check(self) -> None:
        if self.queue is not None and time.monotonic() >= self.at:
            warn_if_no_consumer(self.producer, self.queue)
            self.queue = None


def follow(producer: Any, run_id: str, timeout: float | None = None, *, queue: str | None = None) -> RunProgress:
    """Poll the run until it is no longer running; after ``timeout`` seconds exit 3.

    With ``queue``, warn once when no worker consumes it (and keep waiting).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    watch = _Watch(producer, queue)
    if out.is_terminal:
        return _follow_bar(producer, run_id, deadline, watch)
    return _follow_plain(producer, run_id, deadline, watch)


def _give_up(run_id: str, deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        shown = printable(run_id)
        err.print(f"run {shown} is still running; follow it with `vectorsync status {shown}`", highlight=False)
        raise typer.Exit(3)


def _follow_bar(producer: Any, run_id: str, deadline: float | None, watch: _Watch) -> RunProgress:
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeRemainingColumn(),
        TextColumn("[red]{task.fields[failed]} failed"),
    )
    look = BuildLook(getattr(producer, "settings", None))
    with Progress(*columns, console=out, transient=False) as bar:
        task = bar.add_task("indexing", total=None, rate="", failed=0)
        start = time.monotonic()
        while True:
            run = producer.reindex_status(run_id)
            rate = run.processed / max(time.monotonic() - start, 1e-6)
            bar.update(
                task,
                total=run.total,
                completed=run.processed,
                rate=f"{rate:,.0f} rec/s",
                failed=run.failed,
                description=_building(look.progress(run, every=BUILD_EVERY_SECONDS))
                if run.status == RunStatus.INDEXING
                else "indexing",
            )
            if _settled(run):
                look.close()
                return run
            _give_up(run_id, deadline)
            watch.check()
            time.sleep(POLL_SECONDS)


def _building(build: Any) -> str:
    return "building the vector index" + (f": {printable(build.describe())}" if build is not None else "")


def _follow_plain(producer: Any, run_id: str, deadline: float | None, watch: _Watch) -> RunProgress:
    last_line, last_time = "", 0.0
    look = BuildLook(getattr(producer, "settings", None))
    while True:
        run = producer.reindex_status(run_id)
        build = look.progress(run, every=PLAIN_EVERY_SECONDS)
        line = (
            f"run {run_id}: {run.processed}/{run.total if run.total is not None else '?'} "
            f"(done {run.done}, skipped {run.skipped}, failed {run.failed}) {run.status}"
            + (f"; {_building(build)}" if build is not None else "")
        )
        if line != last_line and (time.monotonic() - last_time >= PLAIN_EVERY_SECONDS or _settled(run)):
            print(printable(line), flush=True)
            last_line, last_time = line, time.monotonic()
        if _settled(run):
            look.close()
            return run
        _give_up(run_id, deadline)
        watch.check()
        time.sleep(POLL_SECONDS)


def _settled(run: RunProgress) -> bool:
    """Whether following the run is over: it ended, or it paused at its budget (it waits for ``runs resume``)."""
    return run.status.ended or run.status == RunStatus.PAUSED


def summary(run: RunProgress) -> None:
    """One line: how the run ended, its counts and how long it took."""
    took = (run.finished_at - run.started_at).total_seconds() if run.finished_at else 0.0
    colour = "green" if run.status == RunStatus.DONE and not run.failed else "red"
    out.print(
        styled(
            (str(run.status), colour),
            f": {run.total} records, {run.done} indexed, {run.skipped} "
            f"unchanged, {run.failed} failed in {took:.1f}s" + (f" — {printable(run.error)}" if run.error else ""),
        ),
        highlight=False,
    )
    if run.failed:
        out.print("see them with `vectorsync failures`; replay with `vectorsync failures --retry`")


def follow_bulk(producer: Any, run_id: str, timeout: float | None) -> bool:
    """Follow a run on the bulk queue to its end and print its summary; True when it is done with no failure."""
    final = guarded(lambda: follow(producer, run_id, timeout, queue=BULK_QUEUE))
    summary(final)
    return final.status == RunStatus.DONE and not final.failed
