"""Names users choose and vectorsync builds identifiers from: collections."""

from __future__ import annotations

import re

from store.errors import ConfigError, echo

__all__ = ["GENERATION_NAME", "check_collection_name", "check_declared_name", "parse_name"]

_COLLECTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,47}")
#: ``notes__g2``: generation 2 of ``notes`` (``store.state.generations``), a name no declared collection may take.
GENERATION_NAME = re.compile(r"(?P<collection>[a-z][a-z0-9_]*?)__g(?P<number>[1-9][0-9]{0,5})")


def parse_name(name: str) -> tuple[str, int | None]:
    """``("notes", 2)`` for ``notes__g2``; ``("notes", None)`` for the collection's own name."""
    found = GENERATION_NAME.fullmatch(name)
    return (found["collection"], int(found["number"])) if found else (name, None)


def check_collection_name(name: object) -> str:
    """Return ``name`` if it is a valid collection name, else raise ConfigError naming it (its start, when long)."""
    if not isinstance(name, str) or not _COLLECTION_NAME.fullmatch(name):
        raise ConfigError(
            f"collection name {echo(name)} is not allowed: use 1-48 lower-case letters, "
            "digits and '_', starting with a letter (e.g. 'activity_notes')"
        )
    return name


def check_declared_name(name: object) -> str:
    """``check_collection_name``, and not a generation's name, which ``vectorsync migrate`` makes."""
    checked = check_collection_name(name)
    if GENERATION_NAME.fullmatch(checked):
        raise ConfigError(
            f"collection name {checked!r} ends like a generation of a migrated collection (__gN): "
            f"pick another name, e.g. {checked.replace('__g', '_g')!r}"
        )
    return checked
