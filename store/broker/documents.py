"""The id of a pushed document: the one given, else the metadata field the settings name, else a content hash.

A hash of the text and the canonical metadata makes the same document pushed twice one record; a document
whose text changes then gets a new id, so documents that are edited in place want an id or an id field.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from store.errors import ConfigError
from store.vectors.records import canonical_json, clean_text

__all__ = ["HASH_CHARS", "content_id", "document_id", "field_id"]

#: Hex characters of a content-hash id: 128 bits, unique among any number of documents one collection holds.
HASH_CHARS = 32


def document_id(
    collection: str, text: str, metadata: Mapping[str, Any], *, id: object = None, id_field: str | None = None
) -> str:
    """The id ``index_document`` uses: ``id`` when given, else ``metadata[id_field]`` when the collection's
    ``source.id_field`` names one, else ``content_id``. ``metadata`` is clean (``validate_metadata``).
    Raises ConfigError naming the value and the fix."""
    if id is not None:
        return _checked(id, what="document id")
    if id_field is not None:
        return field_id(collection, metadata, id_field)
    return content_id(text, metadata)


def field_id(collection: str, metadata: Mapping[str, Any], id_field: str) -> str:
    """The id held in ``metadata`` at ``id_field`` (dotted for nested objects). Raises ConfigError."""
    value: Any = metadata
    for part in id_field.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise ConfigError(
                f"the document's metadata has no {id_field!r}, which collections.{collection}.source.id_field "
                f"names as its id (metadata keys: {sorted(metadata)}): add it to the metadata, or pass id="
            )
        value = value[part]
    return _checked(
        value,
        what=f"metadata {id_field!r} (collections.{collection}.source.id_field)",
        fix="fix the metadata, or pass id=",
    )


def content_id(text: str, metadata: Mapping[str, Any]) -> str:
    """A hash of the text (as it is stored) and the canonical JSON of the metadata."""
    payload = canonical_json({"text": clean_text(text), "metadata": metadata})
    return hashlib.sha256(payload.encode()).hexdigest()[:HASH_CHARS]


def _checked(value: object, *, what: str, fix: str = "use a non-empty string or an integer") -> str:
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise ConfigError(f"{what} is {value!r}, which is not an id (a non-empty string or an integer): {fix}")
    return str(value)
