"""Filters as SQL over a collection's table, written so PostgreSQL's indexes can serve them.

``eq`` and ``any_of`` become jsonb containment (``metadata @> '{"kind": "call"}'``),
which the GIN index on ``metadata`` serves, combined with ``and``/``or``/``not``.
A range on a declared indexed field compares ``metadata -> 'field'`` as jsonb,
which that field's btree index serves. Other ranges use ``jsonb_path_match``.
Every value is a bound parameter, never SQL or jsonpath text. Field names
reach SQL only through ``field_expression``, after ``check_field`` allowed them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB, JSONPATH

from store.errors import ConfigError
from store.vectors.filters import And, AnyOf, Compare, Eq, Filter, Not, Or, Scalar, check_field

__all__ = ["compile_filter", "field_expression"]

_COMPARE = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def _json_path(field: str) -> str:
    # Quoting keeps names such as "last" or "size" from being read as jsonpath keywords.
    return "$" + "".join(f'."{part}"' for part in field.split("."))


def field_expression(metadata: Any, field: str) -> Any:
    """``metadata -> 'a' -> 'b'`` for field ``a.b``: the expression a declared field's btree index is built on.

    Index and query must spell it the same way for PostgreSQL to match them, so both come from here.
    The keys are literals, safe because ``check_field`` allows only letters, digits and '_'.
    """
    expression = metadata
    for part in check_field(field).split("."):
        expression = expression.op("->")(sa.literal_column(f"'{part}'"))
    return expression


def _nested(field: str, value: Any) -> dict[str, Any]:
    """``{"a": {"b": value}}`` for field ``a.b``."""
    document: Any = value
    for part in reversed(field.split(".")):
        document = {part: document}
    return dict(document)


def _contains(metadata: Any, field: str, value: Scalar) -> sa.ColumnElement[bool]:
    # jsonb containment matches the value itself, or a list holding it: the filter semantics for lists.
    return sa.or_(metadata.contains(_nested(field, value)), metadata.contains(_nested(field, [value])))


def _path_match(metadata: Any, field: str, condition: str, values: dict[str, Any]) -> sa.ColumnElement[bool]:
    # Values travel as jsonpath variables in a bound jsonb parameter, never in the text.
    # lax mode unwraps a list, so a list-valued field matches when one element does.
    path = f"exists({_json_path(field)} ? ({condition}))"
    return sa.func.jsonb_path_match(
        metadata,
        sa.cast(sa.literal(path), JSONPATH),
        sa.cast(sa.literal(json.dumps(values)), JSONB),
        sa.true(),
        type_=sa.Boolean,
    )


def _compare(metadata: Any, filter: Compare, indexed: Mapping[str, str]) -> sa.ColumnElement[bool]:
    if filter.field not in indexed:
        return _path_match(metadata, filter.field, f"@ {_COMPARE[filter.op]} $v", {"v": filter.value})
    # A declared field holds one value of its type (checked at write), so a jsonb comparison is exact once
    # the type matches; jsonb orders all numbers before all strings, hence the type check.
    value = field_expression(metadata, filter.field)
    kind = "string" if isinstance(filter.value, str) else "number"
    bound = sa.cast(sa.literal(json.dumps(filter.value)), JSONB)
    return sa.and_(value.op(_COMPARE[filter.op])(bound), sa.func.jsonb_typeof(value) == kind)


def compile_filter(filter: Filter, table: sa.Table, indexed: Mapping[str, str] | None = None) -> sa.ColumnElement[bool]:
    """Translate a Filter into an index-friendly SQL condition with every value bound as a parameter.

    ``indexed`` names the declared indexed fields (and their types), whose ranges use their btree index.
    """
    metadata = table.c.metadata
    declared = indexed or {}
    match filter:
        case Eq(field="record_id", value=str(value)):
            return table.c.record_id == value
        case AnyOf(field="record_id", values=values) if all(isinstance(v, str) for v in values):
            return table.c.record_id.in_(values)
        case Eq(field=field, value=value):
            return _contains(metadata, field, value)
        case AnyOf(field=field, values=values):
            return sa.or_(*(_contains(metadata, field, v) for v in values))
        case Compare():
            return _compare(metadata, filter, declared)
        case Not(operand=operand):
            # A NULL (record_id absent) must count as "no match" before it is negated.
            return sa.not_(sa.func.coalesce(compile_filter(operand, table, declared), sa.false()))
        case And(parts=parts):
            return sa.and_(*(compile_filter(part, table, declared) for part in parts))
        case Or(parts=parts):
            return sa.or_(*(compile_filter(part, table, declared) for part in parts))
    raise ConfigError(f"unsupported filter {filter!r}")
