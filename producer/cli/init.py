"""``vectorsync init``: upgrade the state database's schema, create the declared collections that are
missing and install change capture where a collection asks for it; safe to run again.

A worker does the same at its start; this lets a deploy step do it first and see what was done.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from producer.cli.console import guarded, open_collections, say

if TYPE_CHECKING:
    from store.settings import Settings
    from store.state.database import Upgrade

__all__ = ["init"]


def init() -> None:
    """Upgrade the state database's schema to this vectorsync's version, create the declared collections that
    are missing and install change capture where a collection asks for it; safe to run again."""
    from store.settings import load_settings

    settings = guarded(load_settings)
    upgrade = _upgrade_state(settings)
    settings, collections = open_collections(settings)
    with collections:
        created = set(guarded(collections.create_declared))
    say(
        f"state tables ready in {upgrade.where} ({_version(upgrade)})"
        if upgrade
        else "state kept in memory (vectors.store = memory)"
    )
    for name in sorted(settings.collections):
        say(f"{'created' if name in created else 'exists '}  {name}")
    if not settings.collections:
        say("no collection is declared: add [collections.NAME] to the settings")
    _install_capture(settings)


def _install_capture(settings: Settings) -> None:
    from store.capture import captured
    from store.capture.control import enable

    for name in sorted(captured(settings)):
        target = guarded(lambda name=name: enable(settings, name))  # type: ignore[misc]
        say(f"capture  {name} on {target.qualified_table}")


def _upgrade_state(settings: Settings) -> Upgrade | None:
    if settings.state_url is None:
        return None  # before the import: a memory store needs no SQLAlchemy
    from store.state.database import upgrade_state

    return guarded(lambda: upgrade_state(settings))


def _version(upgrade: Upgrade) -> str:
    if not upgrade.changed:
        return f"schema version {upgrade.after}"
    return f"schema version {upgrade.after}, upgraded from {upgrade.before or 'no version'}"
