"""Filters in Qdrant's own language, with exactly the semantics of ``Filter.matches``.

What Qdrant cannot say exactly (an order over strings, integers beyond 2**53)
is left as a residual that is checked in Python on the points Qdrant returns
for the rest of the filter. User metadata lives under the payload key
``metadata``, so the filter field ``owner.id`` is the payload key ``metadata.owner.id``.
"""

from __future__ import annotations

from collections.abc import Iterator

from qdrant_client import models

from store.vectors.filters import And, AnyOf, Compare, Eq, Filter, Not, Or

__all__ = ["EXACT_INT", "METADATA_KEY", "excluding", "payload_key", "split_filter"]

#: Integers up to this size are exact as the 64-bit floats Qdrant's ranges use.
EXACT_INT = 2**53
#: Payload keys this module writes; user metadata lives under ``metadata``.
METADATA_KEY = "metadata"


def split_filter(filter: Filter | None) -> tuple[models.Filter | None, Filter | None]:
    """Split ``filter`` into what Qdrant evaluates exactly and a residual checked in Python.

    Only a top-level conjunction is split; any other filter that Qdrant cannot
    express exactly goes to Python whole. Either part may be None.
    """
    if filter is None:
        return None, None
    if _native(filter):
        return _as_qdrant_filter(_condition(filter)), None
    parts = list(_conjuncts(filter))
    native = [part for part in parts if _native(part)]
    rest = [part for part in parts if not _native(part)]
    where = models.Filter(must=[_condition(part) for part in native]) if native else None
    return where, rest[0] if len(rest) == 1 else And(tuple(rest))


def _conjuncts(filter: Filter) -> Iterator[Filter]:
    """The parts of nested top-level ``And``s, flattened."""
    if isinstance(filter, And):
        for part in filter.parts:
            yield from _conjuncts(part)
    else:
        yield filter


def _exact_value(value: object) -> bool:
    """Whether Qdrant compares ``value`` exactly: strings and bools by match, numbers as f64."""
    return not isinstance(value, int) or isinstance(value, bool) or abs(value) <= EXACT_INT


def _native(filter: Filter) -> bool:
    """Whether Qdrant can evaluate ``filter`` with exactly the semantics of ``Filter.matches``."""
    if isinstance(filter, Eq):
        return _exact_value(filter.value)
    if isinstance(filter, AnyOf):
        return all(_exact_value(value) for value in filter.values)
    if isinstance(filter, Compare):
        return not isinstance(filter.value, str) and _exact_value(filter.value)
    if isinstance(filter, Not):
        return _native(filter.operand)
    if isinstance(filter, And | Or):
        # An empty `should` matches everything in Qdrant but nothing in Filter.matches.
        return (isinstance(filter, And) or bool(filter.parts)) and all(_native(p) for p in filter.parts)
    return False


def payload_key(field: str) -> str:
    return f"{METADATA_KEY}.{field}"


def _condition(filter: Filter) -> models.Condition:
    """The Qdrant condition for a filter that ``_native`` accepted."""
    if isinstance(filter, Eq):
        return _eq(filter.field, filter.value)
    if isinstance(filter, AnyOf):
        return models.Filter(should=[_eq(filter.field, value) for value in filter.values])
    if isinstance(filter, Compare):
        bound = float(filter.value)  # _native admits numbers only
        return models.FieldCondition(key=payload_key(filter.field), range=models.Range(**{filter.op: bound}))
    if isinstance(filter, Not):
        return models.Filter(must_not=[_condition(filter.operand)])
    if isinstance(filter, And):
        return models.Filter(must=[_condition(part) for part in filter.parts])
    if isinstance(filter, Or):
        return models.Filter(should=[_condition(part) for part in filter.parts])
    raise TypeError(f"no Qdrant condition for {filter!r}")  # _native refuses these first


def _eq(field: str, value: object) -> models.FieldCondition:
    """Equality, typed: a number matches ints and floats (1 == 1.0) but never a boolean."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return models.FieldCondition(key=payload_key(field), range=models.Range(gte=value, lte=value))
    return models.FieldCondition(key=payload_key(field), match=models.MatchValue(value=value))


def _as_qdrant_filter(condition: models.Condition) -> models.Filter:
    return condition if isinstance(condition, models.Filter) else models.Filter(must=[condition])


def excluding(where: models.Filter | None, point_ids: list[str]) -> models.Filter | None:
    """``where`` minus the points ``point_ids``."""
    if not point_ids:
        return where
    has_id: list[models.ExtendedPointId] = list(point_ids)
    return models.Filter(must=[where] if where else None, must_not=[models.HasIdCondition(has_id=has_id)])
