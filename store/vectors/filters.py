"""Metadata filters: one small tree that every backend compiles into its own query.

Semantics every backend must share (the conformance suite checks them):
comparisons are typed (numbers with numbers, strings with strings, booleans
only by equality); a missing field or a field of another type does not match;
a field holding a list matches when one of its elements does; ``not_`` matches
exactly the records its operand does not match, missing fields included.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any, ClassVar, Literal, TypeAlias

from store.errors import ConfigError
from store.settings import FIELD_PATTERN, LimitSettings, default
from store.vectors.records import escape_unstorable, has_unstorable

__all__ = [
    "MISSING",
    "And",
    "AnyOf",
    "Compare",
    "Eq",
    "Filter",
    "Not",
    "Or",
    "Scalar",
    "check_field",
    "check_size",
    "fields_of",
    "lookup",
]

Scalar: TypeAlias = str | int | float | bool
CompareOp = Literal["gt", "gte", "lt", "lte"]

#: Levels of $and/$or/$not a filter's JSON form may nest (limits.max_filter_depth's default).
DEFAULT_MAX_DEPTH: int = default(LimitSettings, "max_filter_depth")
_FIELD = re.compile(FIELD_PATTERN)
#: What ``lookup`` returns for a field the metadata does not hold.
MISSING = object()


def check_field(field: object) -> str:
    """Return ``field`` if it is a safe field name, else raise ConfigError."""
    if not isinstance(field, str) or len(field) > 200 or not _FIELD.fullmatch(field):
        raise ConfigError(
            f"filter field {field!r} is not allowed: use letters, digits and '_', "
            "dotted for nested objects (e.g. 'owner.id')"
        )
    return field


def _check_value(value: object, *, field: str, comparable: bool = False) -> Scalar:
    kinds = "a string or a number" if comparable else "a string, a number or a boolean"
    if isinstance(value, bool) and comparable:
        raise ConfigError(f"filter value {value!r} for {field!r} cannot be ordered: use {kinds}")
    if not isinstance(value, str | int | float) or (isinstance(value, float) and not math.isfinite(value)):
        raise ConfigError(f"filter value {value!r} for {field!r} is not allowed: use {kinds}")
    if isinstance(value, str) and has_unstorable(value):  # pgvector refused it, memory and Qdrant matched nothing
        raise ConfigError(
            f"filter value {escape_unstorable(value)!r} for {field!r} holds a NUL character or a lone "
            "surrogate, which no stored value can hold: remove it"
        )
    return value


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "other"


def lookup(metadata: Mapping[str, Any], field: str) -> Any:
    """The value at dotted ``field`` in ``metadata``, or ``MISSING``."""
    value: Any = metadata
    for part in field.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return MISSING
        value = value[part]
    return value


def _leaf_values(metadata: Mapping[str, Any], field: str) -> list[Any]:
    value = lookup(metadata, field)
    if value is MISSING:
        return []
    return list(value) if isinstance(value, list) else [value]


def _comparison(op: CompareOp) -> Callable[[str, str | float], Compare]:
    """The constructor ``Filter.<op>``: one body for the four comparisons."""

    def build(field: str, value: str | float) -> Compare:
        return Compare(check_field(field), op, _check_value(value, field=field, comparable=True))

    build.__name__ = build.__qualname__ = op
    return build


class Filter:
    """Base of the filter tree; build filters with the class methods and ``& | ~``."""

    __slots__ = ()

    @staticmethod
    def eq(field: str, value: Scalar) -> Eq:
        return Eq(check_field(field), _check_value(value, field=field))

    @staticmethod
    def any_of(field: str, values: Iterable[Scalar]) -> AnyOf:
        if isinstance(values, str | bytes) or not isinstance(values, Iterable):
            raise ConfigError(f"any_of({field!r}, ...) takes a list of values, got {values!r}")
        checked = tuple(_check_value(v, field=field) for v in values)
        if not checked:
            raise ConfigError(f"any_of({field!r}, []) can never match: pass at least one value")
        return AnyOf(check_field(field), checked)

    #: Records whose ``field`` is greater than (``gt``), at least (``gte``), less than (``lt``) or at most
    #: (``lte``) ``value``: numbers, or strings compared as text (ISO dates sort right).
    gt = staticmethod(_comparison("gt"))
    gte = staticmethod(_comparison("gte"))
    lt = staticmethod(_comparison("lt"))
    lte = staticmethod(_comparison("lte"))

    @staticmethod
    def not_(operand: Filter) -> Not:
        if not isinstance(operand, Filter):
            raise ConfigError(f"not_ takes a Filter, got {operand!r}")
        return Not(operand)

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Filter:
        """Build a filter from its JSON form, e.g. ``{"kind": "call", "n": {"$gte": 2}}``."""
        return _from_dict(data)

    def __and__(self, other: Filter) -> And:
        return And((self, _as_filter(other)))

    def __or__(self, other: Filter) -> Or:
        return Or((self, _as_filter(other)))

    def __invert__(self) -> Not:
        return Not(self)

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        """Evaluate this filter against one record's metadata in memory."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """The JSON form that ``Filter.from_dict`` reads back."""
        raise NotImplementedError


def _as_filter(value: object) -> Filter:
    if not isinstance(value, Filter):
        raise ConfigError(f"filters combine only with filters, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Eq(Filter):
    field: str
    value: Scalar

    def __post_init__(self) -> None:
        check_field(self.field)  # also when built directly, not through Filter.eq

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        want = _kind(self.value)
        return any(_kind(v) == want and v == self.value for v in _leaf_values(metadata, self.field))

    def to_dict(self) -> dict[str, Any]:
        return {self.field: {"$eq": self.value}}


@dataclass(frozen=True, slots=True)
class AnyOf(Filter):
    field: str
    values: tuple[Scalar, ...]
    #: The values as ``Eq`` compares them, kind then value, made once: a memory scan asks it of every record.
    _wanted: frozenset[tuple[str, Scalar]] = dataclass_field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_field(self.field)
        object.__setattr__(self, "_wanted", frozenset((_kind(v), v) for v in self.values))

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        for value in _leaf_values(metadata, self.field):
            try:
                if (_kind(value), value) in self._wanted:
                    return True
            except TypeError:  # an unhashable leaf (a mapping) equals no scalar
                continue
        return False

    def to_dict(self) -> dict[str, Any]:
        return {self.field: {"$in": list(self.values)}}


@dataclass(frozen=True, slots=True)
class Compare(Filter):
    field: str
    op: CompareOp
    value: str | float

    def __post_init__(self) -> None:
        check_field(self.field)
        if self.op not in ("gt", "gte", "lt", "lte"):
            raise ConfigError(f"comparison {self.op!r} is not one of gt, gte, lt, lte")

    _TESTS: ClassVar[dict[str, Any]] = {
        "gt": lambda a, b: a > b,
        "gte": lambda a, b: a >= b,
        "lt": lambda a, b: a < b,
        "lte": lambda a, b: a <= b,
    }

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        want, test = _kind(self.value), self._TESTS[self.op]
        return any(_kind(v) == want and test(v, self.value) for v in _leaf_values(metadata, self.field))

    def to_dict(self) -> dict[str, Any]:
        return {self.field: {f"${self.op}": self.value}}


@dataclass(frozen=True, slots=True)
class Not(Filter):
    operand: Filter

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        return not self.operand.matches(metadata)

    def to_dict(self) -> dict[str, Any]:
        return {"$not": self.operand.to_dict()}


@dataclass(frozen=True, slots=True)
class _Group(Filter):
    """``And`` and ``Or``: parts joined by ``all`` or ``any``, written as ``{"$and": [...]}`` or ``{"$or": [...]}``."""

    parts: tuple[Filter, ...]
    _JOIN: ClassVar[Callable[[Iterable[bool]], bool]]
    _KEY: ClassVar[str]

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        return type(self)._JOIN(part.matches(metadata) for part in self.parts)

    def to_dict(self) -> dict[str, Any]:
        return {self._KEY: [part.to_dict() for part in self.parts]}


@dataclass(frozen=True, slots=True)
class And(_Group):
    _JOIN = all
    _KEY = "$and"


@dataclass(frozen=True, slots=True)
class Or(_Group):
    _JOIN = any
    _KEY = "$or"


_FIELD_OPS: dict[str, Callable[[str, Any], Filter]] = {
    "$eq": Filter.eq,
    "$in": Filter.any_of,
    "$gt": Filter.gt,
    "$gte": Filter.gte,
    "$lt": Filter.lt,
    "$lte": Filter.lte,
    "$ne": lambda f, v: Not(Filter.eq(f, v)),
    "$nin": lambda f, v: Not(Filter.any_of(f, v)),
}


def _combine(parts: list[Filter], kind: type[And] | type[Or]) -> Filter:
    return parts[0] if len(parts) == 1 else kind(tuple(parts))


def _from_list(key: str, value: object, depth: int) -> list[Filter]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{key} takes a non-empty list of filters, got {_brief(value)}")
    return [_from_dict(item, depth + 1) for item in value]


def _brief(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def check_size(filter: Filter, *, max_depth: int, max_terms: int) -> Filter:
    """Return ``filter`` unless it nests deeper than ``max_depth`` or holds more than ``max_terms``
    conditions and values; then a ConfigError naming the cap (checked without recursion)."""
    terms, stack = 0, [(filter, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise ConfigError(f"the filter nests more than {max_depth} levels: flatten it (limits.max_filter_depth)")
        if isinstance(node, And | Or):
            stack.extend((part, depth + 1) for part in node.parts)
        elif isinstance(node, Not):
            stack.append((node.operand, depth + 1))
        else:
            terms += len(node.values) if isinstance(node, AnyOf) else 1
        if terms > max_terms:
            raise ConfigError(
                f"the filter holds more than {max_terms} conditions and values: narrow it, or match "
                "on a field that groups them (limits.max_filter_terms)"
            )
    return filter


def fields_of(filter: Filter) -> tuple[str, ...]:
    """The fields ``filter`` names, each once, in the order they first appear (checked without recursion)."""
    found: dict[str, None] = {}
    stack = [filter]
    while stack:
        node = stack.pop()
        if isinstance(node, And | Or):
            stack.extend(reversed(node.parts))
        elif isinstance(node, Not):
            stack.append(node.operand)
        else:
            found.setdefault(node.field)  # type: ignore[attr-defined]
    return tuple(found)


def _from_field(field: str, spec: object) -> list[Filter]:
    if not isinstance(spec, Mapping):
        return [Filter.eq(field, spec)]  # type: ignore[arg-type]
    if not spec:
        raise ConfigError(f"filter for {field!r} is an empty object: give a value or an operator")
    parts = []
    for op, value in spec.items():
        if op not in _FIELD_OPS:
            raise ConfigError(f"unknown filter operator {op!r} for {field!r}: use one of {', '.join(_FIELD_OPS)}")
        parts.append(_FIELD_OPS[op](field, value))
    return parts


def _from_dict(data: object, depth: int = 1) -> Filter:
    if depth > DEFAULT_MAX_DEPTH:
        raise ConfigError(
            f"the filter nests more than {DEFAULT_MAX_DEPTH} levels of $and/$or/$not: flatten it "
            "(limits.max_filter_depth)"
        )
    if not isinstance(data, Mapping) or not data:
        raise ConfigError(f"a filter is a non-empty JSON object, got {_brief(data)}")
    parts: list[Filter] = []
    for key, value in data.items():
        if key == "$and":
            parts.append(_combine(_from_list(key, value, depth), And))
        elif key == "$or":
            parts.append(_combine(_from_list(key, value, depth), Or))
        elif key == "$not":
            parts.append(Not(_from_dict(value, depth + 1)))
        elif isinstance(key, str) and key.startswith("$"):
            raise ConfigError(f"unknown filter operator {key!r}: use $and, $or, $not or a field name")
        else:
            parts.extend(_from_field(check_field(key), value))
    return _combine(parts, And)
