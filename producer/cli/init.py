"""``vectorsync init``: create the state tables and the declared collections that are missing; safe to run again.

A worker does the same at its start; this lets a deploy step do it first and see what was created.
"""

from __future__ import annotations

from producer.cli.console import guarded, open_collections, say

__all__ = ["init"]


def init() -> None:
    """Create the state tables and the declared collections that are missing; safe to run again."""
    settings, collections = open_collections()
    with collections:
        created = set(guarded(collections.create_declared))
        where = getattr(collections.ledger, "safe_url", None)
    say(f"state tables ready in {where}" if where else "state kept in memory (vectors.store = memory)")
    for name in sorted(settings.collections):
        say(f"{'created' if name in created else 'exists '}  {name}")
    if not settings.collections:
        say("no collection is declared: add [collections.NAME] to the settings")
