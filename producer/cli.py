"""The ``vectorsync`` command: reindex with progress, index, search, status, failures, collections."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn
from rich.table import Table

from store.errors import VectorsyncError
from store.state import RunProgress, RunStatus

__all__ = ["app", "main"]

app = typer.Typer(help="Keep vector indexes in sync with your records.", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False)
out = Console(soft_wrap=True)  # messages stay whole lines on a pipe; tables still fit the width
err = Console(stderr=True, soft_wrap=True)
T = TypeVar("T")
#: Seconds between progress polls of ``reindex --wait``.
POLL_SECONDS = 0.5
#: Seconds between plain progress lines when the output is not a terminal.
PLAIN_EVERY_SECONDS = 2.0


@app.callback()
def _options(config: Annotated[str | None, typer.Option("--config", "-c", help="settings file (VECTORSYNC_CONFIG)")]
             = None) -> None:
    if config:
        os.environ["VECTORSYNC_CONFIG"] = config


def _producer() -> Any:
    from producer.client import default_producer

    with _errors():
        return default_producer()


@contextmanager
def _errors() -> Iterator[None]:
    """One clear line and a non-zero exit instead of a traceback."""
    try:
        yield
    except VectorsyncError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(2) from None
    except Exception as exc:
        from kombu.exceptions import OperationalError

        if isinstance(exc, OperationalError):
            err.print(f"[red]error:[/red] the broker cannot be reached: {exc} (broker.url)", highlight=False)
            raise typer.Exit(2) from None
        raise


def _run(action: Callable[[], T]) -> T:
    with _errors():
        return action()


@app.command()
def reindex(
    collection: str,
    full: Annotated[bool, typer.Option(help="also remove records gone from the source")] = False,
    allow_empty: Annotated[bool, typer.Option(help="with --full, allow emptying the collection")] = False,
    wait: Annotated[bool, typer.Option(help="follow the run until it ends")] = False,
    timeout: Annotated[float | None, typer.Option(help="with --wait, stop following after this many seconds")] = None,
) -> None:
    """Reindex a whole collection; --wait shows progress until it ends."""
    producer = _producer()
    run_id = _run(lambda: producer.reindex_all(collection, full=full, allow_empty=allow_empty))
    out.print(f"run {run_id} started for {collection}", highlight=False)
    if not wait:
        return
    final = _run(lambda: _follow(producer, run_id, timeout))
    _summary(final)
    if final.status != RunStatus.DONE or final.failed:
        raise typer.Exit(1)


def _follow(producer: Any, run_id: str, timeout: float | None = None) -> RunProgress:
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


def _summary(run: RunProgress) -> None:
    took = (run.finished_at - run.started_at).total_seconds() if run.finished_at else 0.0
    colour = "green" if run.status == RunStatus.DONE and not run.failed else "red"
    out.print(f"[{colour}]{run.status}[/{colour}]: {run.total} records, {run.done} indexed, {run.skipped} unchanged, "
              f"{run.failed} failed in {took:.1f}s" + (f" — {run.error}" if run.error else ""), highlight=False)
    if run.failed:
        out.print("see them with `vectorsync failures`; replay with `vectorsync failures --retry`")


@app.command()
def index(collection: str, ids: Annotated[list[str], typer.Argument(help="record ids")]) -> None:
    """Enqueue records by id (coalesced with ones already queued)."""
    sent = _run(lambda: _producer().index_records(collection, ids))
    out.print(f"enqueued {sent} of {len(ids)} records for {collection}")


@app.command()
def reconcile(
    collection: str,
    wait: Annotated[bool, typer.Option(help="follow the sweep until it ends")] = False,
    timeout: Annotated[float | None, typer.Option(help="with --wait, stop following after this many seconds")] = None,
) -> None:
    """Compare the source with what is indexed; index what is missing or stale, drop what is gone."""
    producer = _producer()
    run_id = _run(lambda: producer.reconcile(collection))
    out.print(f"reconcile {run_id} started for {collection}", highlight=False)
    if wait:
        final = _run(lambda: _follow(producer, run_id, timeout))
        _summary(final)
        if final.status != RunStatus.DONE or final.failed:
            raise typer.Exit(1)


@app.command()
def search(
    collection: str,
    query: str,
    filter: Annotated[str | None, typer.Option("--filter", "-f", help='JSON, e.g. {"kind": "call"}')] = None,
    limit: Annotated[int, typer.Option("--limit", "-n")] = 10,
    min_score: Annotated[float | None, typer.Option("--min-score")] = None,
) -> None:
    """Search a collection with a text query and an optional metadata filter."""
    from store.query import search as run_search

    def go() -> list[Any]:
        parsed = _parse_filter(filter)
        return run_search(collection, query, filter=parsed, limit=limit, min_score=min_score)

    matches = _run(go)
    table = Table("score", "id", "text", "metadata")
    for m in matches:
        table.add_row(f"{m.score:.3f}", m.id, _short(m.text, 80), _short(json.dumps(m.metadata), 60))
    out.print(table)


def _parse_filter(text: str | None) -> dict[str, Any] | None:
    from store.errors import ConfigError

    if text is None:
        return None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        example = '{"kind": "call"}'
        raise ConfigError(f"--filter {text!r} is not JSON ({exc.msg}); e.g. --filter '{example}'") from None
    return parsed  # type: ignore[no-any-return]


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


@app.command()
def status(run: Annotated[str | None, typer.Argument(help="a run id; all recent runs when omitted")] = None) -> None:
    """Show reindex runs and their progress."""
    producer = _producer()
    runs = _run(lambda: [producer.reindex_status(run)] if run else producer.state.recent_runs())
    table = Table("run", "collection", "status", "total", "done", "skipped", "failed", "started")
    for r in runs:
        table.add_row(r.run_id, r.collection, str(r.status), str(r.total if r.total is not None else "?"),
                      str(r.done), str(r.skipped), str(r.failed), r.started_at.strftime("%Y-%m-%d %H:%M:%S"))
    out.print(table)


@app.command()
def failures(
    collection: Annotated[str | None, typer.Option("--collection")] = None,
    retry: Annotated[bool, typer.Option("--retry", help="enqueue every failed record again")] = False,
) -> None:
    """List records that failed to index; --retry enqueues them again."""
    producer = _producer()
    found = _run(lambda: producer.state.failures(collection))
    table = Table("collection", "record", "attempts", "last seen", "error")
    for f in found:
        table.add_row(f.collection, f.record_id, str(f.attempts), f.last_seen.strftime("%Y-%m-%d %H:%M:%S"),
                      _short(f.error, 100))
    out.print(table)
    if retry:
        sent = pushed = 0
        for f in found:
            config = producer.settings.collections.get(f.collection)
            if config is not None and config.source.kind == "push":
                pushed += 1  # the content is the app's: only a new index_document can replay it
                continue
            with _errors():
                sent += producer.index_record(f.collection, f.record_id)
        out.print(f"enqueued {sent} failed records again")
        if pushed:
            out.print(f"{pushed} failed records belong to pushed collections: send them again with index_document")


@app.command()
def collections() -> None:
    """List the configured collections with their chunk counts."""
    from store.query import default_store

    def go() -> list[tuple[str, str, int]]:
        producer = _producer()
        store = default_store()
        return [(name, c.source.kind, store.collection(name).count())
                for name, c in sorted(producer.settings.collections.items())]

    table = Table("collection", "source", "chunks")
    for name, kind, count in _run(go):
        table.add_row(name, kind, str(count))
    out.print(table)


@app.command()
def dev(
    dir: Annotated[str, typer.Option("--dir", help="working folder: settings, data, logs")] = ".vectorsync-dev",
    serve: Annotated[bool, typer.Option(help="keep serving after the sample searches (--no-serve: stop)")] = True,
    fresh: Annotated[bool, typer.Option(help="drop the data of an earlier run first")] = False,
    model: Annotated[str, typer.Option(help="embedding model: auto (local when installed, else fake), local, fake")]
    = "auto",
) -> None:
    """Run the whole system on this machine (Redis, PostgreSQL, workers, Flower) with sample data; Ctrl-C stops it."""
    from pathlib import Path

    from producer.dev import run_dev

    code = run_dev(Path(dir), serve=serve, fresh=fresh, model=model)
    if code:
        raise typer.Exit(code)


def main() -> None:
    """Console-script entry point."""
    app(prog_name="vectorsync")


if __name__ == "__main__":  # pragma: no cover
    main()
