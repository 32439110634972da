"""The ``vectorsync`` command: reindex with progress, index, search, status, failures; collections and init."""

from __future__ import annotations

import json
import os
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from producer.cli.collections import collections_app, init
from producer.cli.console import errors, guarded, out, say, short
from producer.cli.migrate import migrate
from producer.cli.progress import follow, summary, warn_if_no_consumer
from store.contract import BULK_QUEUE, LIVE_QUEUE
from store.state.ledger import RunStatus

__all__ = ["app", "main"]

app = typer.Typer(help="Keep vector indexes in sync with your records.", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False)


@app.callback()
def _options(config: Annotated[str | None, typer.Option("--config", "-c", help="settings file (VECTORSYNC_CONFIG)")]
             = None) -> None:
    if config:
        os.environ["VECTORSYNC_CONFIG"] = config


def _producer() -> Any:
    from producer.client import default_producer

    with errors():
        return default_producer()


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
    run_id = guarded(lambda: producer.reindex_all(collection, full=full, allow_empty=allow_empty))
    out.print(f"run {run_id} started for {collection}", highlight=False)
    if not wait:
        return
    final = guarded(lambda: follow(producer, run_id, timeout, queue=BULK_QUEUE))
    summary(final)
    if final.status != RunStatus.DONE or final.failed:
        raise typer.Exit(1)


@app.command()
def index(collection: str, ids: Annotated[list[str], typer.Argument(help="record ids")]) -> None:
    """Enqueue records by id (coalesced with ones already queued)."""
    producer = _producer()
    sent = guarded(lambda: producer.index_records(collection, ids))
    out.print(f"enqueued {sent} of {len(ids)} records for {collection}")
    warn_if_no_consumer(producer, LIVE_QUEUE)


@app.command()
def reconcile(
    collection: str,
    wait: Annotated[bool, typer.Option(help="follow the sweep until it ends")] = False,
    timeout: Annotated[float | None, typer.Option(help="with --wait, stop following after this many seconds")] = None,
) -> None:
    """Compare the source with what is indexed; index what is missing or stale, drop what is gone."""
    producer = _producer()
    run_id = guarded(lambda: producer.reconcile(collection))
    out.print(f"reconcile {run_id} started for {collection}", highlight=False)
    if wait:
        final = guarded(lambda: follow(producer, run_id, timeout, queue=BULK_QUEUE))
        summary(final)
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

    matches = guarded(go)
    table = Table("score", "id", "text", "metadata")
    for m in matches:
        # Stored data is printed literally: a chunk holding "[/b]" or "[link=...]" is text, not markup.
        table.add_row(f"{m.score:.3f}", Text(m.id), Text(short(m.text, 80)), Text(short(json.dumps(m.metadata), 60)))
    out.print(table)


@app.command()
def ask(
    collection: str,
    question: str,
    filter: Annotated[str | None, typer.Option("--filter", "-f", help='JSON, e.g. {"owner_id": 7}')] = None,
    as_json: Annotated[bool, typer.Option("--json", help="the answer and its sources as JSON")] = False,
) -> None:
    """Answer a question from a collection's passages, citing them; exit 2 when they do not hold the answer."""
    from dataclasses import asdict

    from store.query import answer

    grounded = guarded(lambda: answer(collection, question, filter=_parse_filter(filter)))
    if as_json:
        print(json.dumps(asdict(grounded), indent=2, default=str))
    elif grounded.answered:
        say(grounded.answer)
        for source in grounded.sources:
            say(f"[{source.number}] {source.record_id} ({source.score:.2f}): {short(source.excerpt, 160)}")
    else:
        say(f"not answered: {grounded.reason}")
    if not grounded.answered:
        raise typer.Exit(2)


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


@app.command()
def status(
    run: Annotated[str | None, typer.Argument(help="a run id, or its first characters; recent runs when omitted")]
    = None,
    as_json: Annotated[bool, typer.Option("--json", help="everything, in full, as JSON")] = False,
) -> None:
    """Show the workers, the queues (depth, oldest message) and the runs; name stalled runs and why."""
    from producer.cli.status import render, snapshot, to_json

    producer = _producer()
    view = guarded(lambda: snapshot(producer, run_id=run))
    if as_json:
        print(to_json(view))
        return
    render(view)
    for progress, _ in view.runs if run else []:
        say(f"done {progress.done}, unchanged {progress.skipped}, failed {progress.failed}"
            + (f"; {progress.error}" if progress.error else ""))


@app.command()
def doctor(as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False) -> None:
    """Check every part the settings name, one line each, with the fix; exit 1 when a required part is broken."""
    from producer.cli import doctor as checkup

    producer = _producer()
    found = []
    for check in checkup.checks(producer.settings, producer):
        found.append(check)
        if not as_json:
            checkup.render(check)
    if as_json:
        print(checkup.to_json(found))
    if any(check.status == "fail" for check in found):
        raise typer.Exit(1)


@app.command()
def failures(
    collection: Annotated[str | None, typer.Option("--collection")] = None,
    retry: Annotated[bool, typer.Option("--retry", help="enqueue every failed record again")] = False,
) -> None:
    """List records that failed to index; --retry enqueues them again."""
    producer = _producer()
    found = guarded(lambda: producer.ledger.failures(collection))
    table = Table("collection", "record", "attempts", "last seen", "error")
    for f in found:
        table.add_row(f.collection, f.record_id, str(f.attempts), f.last_seen.strftime("%Y-%m-%d %H:%M:%S"),
                      short(f.error, 100))
    out.print(table)
    if retry:
        sent = pushed = 0
        for f in found:
            config = producer.settings.collections.get(f.collection)
            if config is not None and config.source.kind == "push":
                pushed += 1  # the content is the app's: only a new index_document can replay it
                continue
            with errors():
                sent += producer.index_record(f.collection, f.record_id)
        out.print(f"enqueued {sent} failed records again")
        if pushed:
            out.print(f"{pushed} failed records belong to pushed collections: send them again with index_document")


app.add_typer(collections_app, name="collections")
app.command()(init)
app.command()(migrate)


@app.command()
def dev(
    dir: Annotated[str, typer.Option("--dir", help="working folder: settings, data, logs")] = ".vectorsync-dev",
    serve: Annotated[bool, typer.Option(help="keep serving after the sample searches (--no-serve: stop)")] = True,
    fresh: Annotated[bool, typer.Option(help="drop the data of an earlier run first")] = False,
    model: Annotated[str, typer.Option(help="embedding model: auto (local when installed, else fake), local, fake")]
    = "auto",
    chat: Annotated[str | None, typer.Option(help="an OpenAI-compatible base URL for the grounded answer "
                                                  "(key: OPENAI_API_KEY); without it the fake chat model")] = None,
    chat_model: Annotated[str, typer.Option(help="the chat model at --chat")] = "gpt-4o-mini",
) -> None:
    """Run the whole system on this machine (Redis, PostgreSQL, workers, Flower) with sample data; Ctrl-C stops it."""
    from pathlib import Path

    from producer.cli.dev.harness import run_dev

    code = run_dev(Path(dir), serve=serve, fresh=fresh, model=model, chat=(chat, chat_model) if chat else None)
    if code:
        raise typer.Exit(code)


def main() -> None:
    """Console-script entry point."""
    app(prog_name="vectorsync")


if __name__ == "__main__":  # pragma: no cover
    main()
