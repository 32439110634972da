"""What ``vectorsync dev`` shows once both collections are indexed: three filtered searches, one grounded answer,
and a plain SQL ``UPDATE`` that a search finds within a second through change capture."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from rich.text import Text

from producer.cli.console import out, say, short, styled
from producer.cli.dev.corpus import CRM_NOTES, CRM_TABLE
from producer.cli.dev.samples import own
from producer.cli.safe_text import printable
from store.settings import Settings

__all__ = ["ASK", "CHANGE", "SEARCHES", "show"]

#: The searches: (collection, query, filter).
SEARCHES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("docs", "how do I catch an exception", {"kind": "python-topic"}),
    ("crm_notes", "customer worried about onboarding time", {"kind": "call"}),
    ("crm_notes", "pricing discount", {"created_at": {"$gte": "2026-10-01"}}),
)
#: The question answered from the passages, with citations: (collection, question, filter).
ASK: tuple[str, str, dict[str, Any]] = ("crm_notes", "What worries customers about onboarding?", {"kind": "call"})

#: A note changed with plain SQL, as psql or another service would, and the search that then finds it:
#: (id, new body, query).
CHANGE = (
    2,
    "Northwind signed for three years at 12% off; invoices go out in Norwegian kroner.",
    "invoices in Norwegian kroner",
)
#: Seconds the change may take to be found before the demo says it was not.
CHANGE_SECONDS = 10.0


def _metadata_text(metadata: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in metadata.items() if k not in ("record_id", "chunk"))


def _elapsed(start: float) -> str:
    return f"({time.monotonic() - start:.1f}s)"


def show(settings: Settings, closers: list[Callable[[], Any]]) -> None:
    """Run the searches and the question against the dev system, printing what they find."""
    from store.query import store_from_settings
    from store.retrieval import Retrieval

    store = store_from_settings(settings)
    closers.append(store.close)
    _searches(store)
    _answer(Retrieval.from_settings(settings, store=store), settings)
    _captured_change(store, settings)


def _searches(store: Any) -> None:
    from store.query import search

    for number, (collection, query, filter) in enumerate(SEARCHES, start=1):
        start = time.monotonic()
        matches = search(collection, query, filter=filter, limit=3, store=store)
        out.print(
            styled(
                "\n",
                (f"search {number}/{len(SEARCHES)}", "bold"),
                f" {collection} {json.dumps(query)} "
                f"--filter '{json.dumps(filter)}': {len(matches)} matches {_elapsed(start)}",
            ),
            highlight=False,
            soft_wrap=True,
        )
        for match in matches:
            out.print(
                Text(f"  {match.score:6.3f}  {printable(match.id):<22} {short(_metadata_text(match.metadata), 70)}"),
                soft_wrap=True,
            )
            out.print(Text(f"          {short(match.text, 100)}"), soft_wrap=True)
        if not matches:
            out.print("  (no matches)")


def _answer(retrieval: Any, settings: Settings) -> None:
    collection, question, filter = ASK
    start = time.monotonic()
    grounded = retrieval.answer(collection, question, filter=filter)
    chat = settings.retrieval.answer
    which = (
        f"chat model {chat[0]!r} ({settings.models[chat[0]].model})"
        if chat
        else "the fake chat model, which quotes the best passage (run with --chat URL for a real one)"
    )
    out.print(
        styled(
            "\n",
            ("ask", "bold"),
            f" {collection} {json.dumps(question)} --filter '{json.dumps(filter)}' {_elapsed(start)}",
        ),
        highlight=False,
        soft_wrap=True,
    )
    say(f"  answered by {which}")
    if not grounded.answered:
        say(f"  not answered: {printable(grounded.reason)}")
        return
    say(f"  {short(grounded.answer, 300)}")
    for source in grounded.sources:
        say(f"  [{source.number}] {printable(source.record_id)} ({source.score:.2f}): {short(source.excerpt, 90)}")


def _captured_change(store: Any, settings: Settings) -> None:
    """UPDATE a note over a connection of its own (no vectorsync call), then search until the new text is found."""
    import sqlalchemy as sa

    from store.connect.postgres import make_engine

    record_id, body, query = CHANGE
    url = settings.collections["crm_notes"].source.url
    assert url is not None
    engine = make_engine(url, setting="the demo database")
    try:
        with engine.begin() as conn:
            # Only the sample note: a note someone changed is theirs, and kept.
            changed = conn.execute(
                sa.text("UPDATE crm_notes SET body = :body WHERE id = :id AND body = :sample"),
                {"body": body, "id": record_id, "sample": CRM_NOTES[record_id - 1][4]},
            ).rowcount
            if changed:
                own(conn, CRM_TABLE, str(record_id))
    finally:
        engine.dispose()
    if not changed:
        say(f"\nchange capture: skipped, crm_notes {record_id} holds a change of yours (--fresh: the samples)")
        return
    start = time.monotonic()
    out.print(
        styled("\n", ("change capture", "bold"), f" UPDATE crm_notes SET body = '{body}' WHERE id = {record_id}"),
        highlight=False,
        soft_wrap=True,
    )
    found = _search_until(store, query, record_id, body, start + CHANGE_SECONDS)
    if found is None:
        say(f"  not found {_elapsed(start)} after the commit: see `vectorsync capture status` and the worker logs")
        return
    say(
        f"  plain SQL, no vectorsync call: search crm_notes {json.dumps(query)} finds {found} "
        f"{time.monotonic() - start:.2f}s after the commit"
    )
    say(
        f"  how: a trigger wrote id {record_id} to vectorsync_outbox in the UPDATE's own transaction; a worker's relay "
        "(polling every 0.5s) sent it to the live queue, where a worker indexed the row"
    )


def _search_until(store: Any, query: str, record_id: int, body: str, deadline: float) -> str | None:
    """The id of the chunk of ``record_id`` holding ``body`` once a search finds it; None at ``deadline``."""
    from store.query import search

    while time.monotonic() < deadline:
        for match in search("crm_notes", query, limit=3, store=store):
            if match.metadata.get("record_id") == str(record_id) and body in match.text:
                return str(match.id)
        time.sleep(0.05)
    return None
