"""Filters as SQL over a collection's table: every value a bound parameter, never SQL or jsonpath text."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB, JSONPATH

from store.errors import ConfigError
from store.vectors.filters import And, AnyOf, Compare, Eq, Filter, Not, Or

__all__ = ["compile_filter"]

_COMPARE = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def _json_path(field: str) -> str:
    # Field names are checked (letters, digits, _) before they get here; quoting keeps
    # names such as "last" or "size" from being read as jsonpath keywords.
    return "$" + "".join(f'."{part}"' for part in field.split("."))


def _path_match(column: Any, field: str, condition: str, values: dict[str, Any]) -> sa.ColumnElement[bool]:
    # Values travel as jsonpath variables in a bound jsonb parameter, never in the text.
    # lax mode unwraps a list, so a list-valued field matches when one element does.
    path = f"exists({_json_path(field)} ? ({condition}))"
    return sa.func.jsonb_path_match(
        column,
        sa.cast(sa.literal(path), JSONPATH),
        sa.cast(sa.literal(json.dumps(values)), JSONB),
        sa.true(),
        type_=sa.Boolean,
    )


def compile_filter(filter: Filter, table: sa.Table) -> sa.ColumnElement[bool]:
    """Translate a Filter into a SQL condition with every value bound as a parameter."""
    metadata = table.c.metadata
    match filter:
        case Eq(field="record_id", value=str(value)):
            return table.c.record_id == value
        case AnyOf(field="record_id", values=values) if all(isinstance(v, str) for v in values):
            return table.c.record_id.in_(values)
        case Eq(field=field, value=value):
            return _path_match(metadata, field, "@ == $v", {"v": value})
        case AnyOf(field=field, values=values):
            condition = " || ".join(f"@ == $v{i}" for i in range(len(values)))
            return _path_match(metadata, field, condition, {f"v{i}": v for i, v in enumerate(values)})
        case Compare(field=field, op=op, value=value):
            return _path_match(metadata, field, f"@ {_COMPARE[op]} $v", {"v": value})
        case Not(operand=operand):
            # A NULL (record_id absent) must count as "no match" before it is negated.
            return sa.not_(sa.func.coalesce(compile_filter(operand, table), sa.false()))
        case And(parts=parts):
            return sa.and_(*(compile_filter(part, table) for part in parts))
        case Or(parts=parts):
            return sa.or_(*(compile_filter(part, table) for part in parts))
    raise ConfigError(f"unsupported filter {filter!r}")
