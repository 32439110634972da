"""Required filters: a collection that declares ``required_filter`` is searched only within one value of each
field (tenancy that cannot be forgotten).

A field counts as pinned when the filter holds ``eq`` on it, or ``any_of`` with exactly one value, at its top
level or inside ``&`` (and) only. An ``|``, a ``~``, a range or an ``any_of`` of several values could let
other values through, so none of them counts, whatever they hold.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from store.errors import ConfigError
from store.vectors.filters import And, AnyOf, Eq, Filter, Scalar, check_field

__all__ = ["check_scoped", "pinned_fields", "required_fields"]


def required_fields(fields: Iterable[str]) -> tuple[str, ...]:
    """``fields`` checked as filter field names, each once, in order."""
    if isinstance(fields, str):
        raise ConfigError(f"required filter fields are a list of names, got {fields!r}: write [{fields!r}]")
    return tuple(dict.fromkeys(check_field(f) for f in fields))


def pinned_fields(filter: Filter | None) -> frozenset[str]:
    """The fields ``filter`` holds to a single value for every record it matches (see the module docstring)."""
    pinned: set[str] = set()
    stack = [filter] if filter is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, Eq) or (isinstance(node, AnyOf) and _one_value(node.values)):
            pinned.add(node.field)
        elif isinstance(node, And):
            stack.extend(node.parts)
    return frozenset(pinned)


def _one_value(values: tuple[Scalar, ...]) -> bool:
    """Whether ``values`` are one value as filters compare them (``1 == 1.0``, but ``True != 1``)."""
    return len({(isinstance(v, bool), v) for v in values}) == 1


def check_scoped(collection: str, required: Iterable[str], filter: Filter | None) -> None:
    """Refuse a search of ``collection`` whose ``filter`` does not pin every ``required`` field.

    Raises ConfigError naming the collection, the missing fields and the fix, before anything is embedded.
    """
    missing = [f for f in required if f not in pinned_fields(filter)]
    if not missing:
        return
    example = "{" + ", ".join(f"{json.dumps(f)}: <value>" for f in missing) + "}"
    pronoun = "it" if len(missing) == 1 else "them"
    given = (
        "the search has no filter"
        if filter is None
        else f"the filter {json.dumps(filter.to_dict())} does not pin {pronoun}"
    )
    raise ConfigError(
        f"collection {collection!r} is searched only with an equality filter on {', '.join(missing)} "
        f"(collections.{collection}.required_filter), but {given}: pass e.g. filter={example} "
        f"(vectorsync search/ask: --filter '{example}'), ANDed with any other condition; "
        "$or, $not, ranges and $in with several values do not count"
    )
