"""Names users choose and vectorsync builds identifiers from: collections."""

from __future__ import annotations

import re

from store.errors import ConfigError

__all__ = ["check_collection_name"]

_COLLECTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,47}")


def check_collection_name(name: object) -> str:
    """Return ``name`` if it is a valid collection name, else raise ConfigError."""
    if not isinstance(name, str) or not _COLLECTION_NAME.fullmatch(name):
        raise ConfigError(
            f"collection name {name!r} is not allowed: use 1-48 lower-case letters, "
            "digits and '_', starting with a letter (e.g. 'activity_notes')"
        )
    return name
