"""What ``vectorsync dev`` shows once both collections are indexed: three filtered searches and one grounded answer."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from rich.text import Text

from producer.cli.console import out, say, short, styled
from store.settings import Settings

__all__ = ["ASK", "SEARCHES", "show"]

#: The searches: (collection, query, filter).
SEARCHES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("docs", "how do I catch an exception", {"kind": "python-topic"}),
    ("crm_notes", "customer worried about onboarding time", {"kind": "call"}),
    ("crm_notes", "pricing discount", {"created_at": {"$gte": "2026-10-01"}}),
)
#: The question answered from the passages, with citations: (collection, question, filter).
ASK: tuple[str, str, dict[str, Any]] = ("crm_notes", "What worries customers about onboarding?", {"kind": "call"})


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
                Text(f"  {match.score:6.3f}  {match.id:<22} {short(_metadata_text(match.metadata), 70)}"),
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
        say(f"  not answered: {grounded.reason}")
        return
    say(f"  {short(grounded.answer, 300)}")
    for source in grounded.sources:
        say(f"  [{source.number}] {source.record_id} ({source.score:.2f}): {short(source.excerpt, 90)}")
