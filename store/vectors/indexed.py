"""Declared indexed fields: metadata fields a collection indexes for filters, each with one type.

A declared field holds one value of its type (or is absent), so an index can
serve ranges on it. Every backend refuses a record that breaks this at write,
with the same message, before anything is stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, get_args

from store.errors import ConfigError
from store.settings import FieldType
from store.vectors.filters import MISSING, check_field, lookup

__all__ = ["FIELD_TYPES", "IndexedFields", "check_declared", "check_indexed"]

#: Field name to type, as ``[collections.NAME.index] fields`` declares them.
IndexedFields = Mapping[str, FieldType]
#: The types a declared field may have.
FIELD_TYPES: tuple[str, ...] = get_args(FieldType)


def check_declared(fields: Mapping[str, str]) -> dict[str, FieldType]:
    """``fields`` as declared indexed fields; a bad name or type is a ConfigError naming it and the fix."""
    for field, kind in fields.items():
        check_field(field)
        if kind not in FIELD_TYPES:
            raise ConfigError(f"indexed field {field!r} has type {kind!r}: use one of {', '.join(FIELD_TYPES)}")
    return dict(fields)  # type: ignore[arg-type]


def _fits(value: object, kind: FieldType) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int)
    if kind == "float":
        return isinstance(value, int | float)
    if not isinstance(value, str):
        return False
    if kind == "datetime":
        try:
            datetime.fromisoformat(value)
        except ValueError:
            return False
    return True


_EXAMPLES: dict[FieldType, str] = {
    "integer": "42",
    "float": "0.5",
    "keyword": '"support"',
    "bool": "true",
    "datetime": '"2026-11-30T06:00:00+00:00" (ISO 8601, one offset for every record: compared as text)',
}


def check_indexed(metadata: Mapping[str, Any], fields: IndexedFields, *, record_id: str, collection: str) -> None:
    """Raise ConfigError naming the record, field, value and fix when a declared field holds another type."""
    for field, kind in fields.items():
        value = lookup(metadata, field)
        if value is MISSING or _fits(value, kind):
            continue
        raise ConfigError(
            f"record {record_id!r}: metadata field {field!r} = {value!r} is not a single {kind}, as "
            f"[collections.{collection}.index] fields declares it: store one value like {_EXAMPLES[kind]}, "
            "or change the declared type"
        )
