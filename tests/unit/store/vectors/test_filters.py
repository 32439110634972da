"""Filter construction, its JSON form, and in-memory evaluation."""

from __future__ import annotations

import math

import pytest

from store import ConfigError, Filter
from store.vectors.filters import And, Compare, Eq, Not, Or, fields_of


def test_operators_build_the_tree() -> None:
    f = Filter.eq("kind", "call") & (Filter.gt("n", 1) | ~Filter.eq("ok", True))
    assert f == And((Eq("kind", "call"), Or((Compare("n", "gt", 1), Not(Eq("ok", True))))))


def test_from_dict_reads_the_documented_form() -> None:
    f = Filter.from_dict(
        {"kind": "call", "created_at": {"$gte": "2026-10-01"}, "$or": [{"owner.id": 7}, {"tags": {"$in": ["a", "b"]}}]}
    )
    assert f.matches({"kind": "call", "created_at": "2026-10-02", "owner": {"id": 7}})
    assert f.matches({"kind": "call", "created_at": "2026-10-02", "tags": ["b"]})
    assert not f.matches({"kind": "call", "created_at": "2026-09-30", "owner": {"id": 7}})


@pytest.mark.parametrize(
    "f",
    [
        Filter.eq("a", 1),
        Filter.any_of("a", ["x", 2]),
        Filter.lte("a.b", "z"),
        ~Filter.eq("a", True) & (Filter.gt("n", 1.5) | Filter.lt("n", -1)),
    ],
)
def test_to_dict_round_trips(f: Filter) -> None:
    assert Filter.from_dict(f.to_dict()) == f


def test_typed_comparisons_and_missing_fields() -> None:
    assert Filter.gt("n", 1).matches({"n": 2}) and not Filter.gt("n", 1).matches({"n": "2"})
    assert not Filter.eq("n", 1).matches({"n": True}) and not Filter.eq("n", True).matches({"n": 1})
    assert not Filter.eq("n", 1).matches({}) and Filter.not_(Filter.eq("n", 1)).matches({})
    assert Filter.eq("tags", "a").matches({"tags": ["b", "a"]})
    assert not Filter.eq("a.b", 1).matches({"a": 1})


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Filter.gt("n", True), "filter value True for 'n' cannot be ordered"),
        (lambda: Filter.eq("n", None), "filter value None for 'n' is not allowed"),
        (lambda: Filter.eq("n", math.nan), "filter value nan for 'n' is not allowed"),
        (lambda: Filter.eq("n", [1]), r"filter value \[1\] for 'n' is not allowed"),
        (lambda: Filter.any_of("n", []), r"any_of\('n', \[\]\) can never match"),
        (lambda: Filter.any_of("n", "abc"), "any_of\\('n', ...\\) takes a list of values"),
        (lambda: Filter.from_dict({"n": {"$regex": "a"}}), "unknown filter operator '\\$regex' for 'n'"),
        (lambda: Filter.from_dict({"$xor": []}), "unknown filter operator '\\$xor'"),
        (lambda: Filter.from_dict({}), "a filter is a non-empty JSON object"),
        (lambda: Filter.from_dict({"$or": {}}), "\\$or takes a non-empty list of filters"),
        (lambda: Filter.eq("a", 1) & {"b": 2}, "filters combine only with filters"),
    ],
)
def test_bad_filters_say_what_is_wrong(build: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build()  # type: ignore[operator]


BAD_FIELDS = ["kind'; DROP TABLE x; --", "a b", "$.kind", 'kind")', "a..b", "", "owner[0]", "kind ? (@ == 1)"]


@pytest.mark.parametrize("field", BAD_FIELDS)
def test_field_names_carrying_sql_or_json_path_are_rejected(field: str) -> None:
    with pytest.raises(ConfigError, match="filter field .* is not allowed: use letters, digits and '_'"):
        Filter.eq(field, 1)
    with pytest.raises(ConfigError, match="is not allowed|unknown filter operator"):
        Filter.from_dict({field: 1})


def test_fields_of_names_each_field_once_in_order() -> None:
    tree = Filter.from_dict({"kind": "call", "$or": [{"owner.id": 1}, {"n": {"$gt": 2}}], "$not": {"kind": "x"}})
    assert fields_of(tree) == ("kind", "owner.id", "n")
    assert fields_of(Filter.any_of("tags", ["a"])) == ("tags",)
