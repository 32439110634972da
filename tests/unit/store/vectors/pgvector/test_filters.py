"""Filters as SQL, without a server: each kind takes the index-usable form (record_id as its column, equality as
jsonb containment, a declared field's range on its btree expression), and every value is a bound parameter,
never SQL or jsonpath text (on real tables: tests/integration/store/vectors/pgvector/test_planner.py)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import JSONB

from store.vectors.filters import Filter
from store.vectors.pgvector.filters import compile_filter, field_expression

TABLE = sa.Table("vs_notes", sa.MetaData(), sa.Column("record_id", sa.Text), sa.Column("metadata", JSONB))
HOSTILE = "x'); DROP TABLE vs_notes; --"


def sql(filter: Filter, indexed: dict[str, str] | None = None) -> tuple[str, dict[str, object]]:
    compiled = compile_filter(filter, TABLE, indexed).compile(dialect=postgresql.dialect())
    return str(compiled), dict(compiled.params)


def test_record_id_is_its_own_column() -> None:
    text, params = sql(Filter.eq("record_id", "42"))
    assert text.startswith("vs_notes.record_id = %(record_id_1)s") and params == {"record_id_1": "42"}
    assert "IN" in sql(Filter.any_of("record_id", ["1", "2"]))[0]


def test_equality_is_containment_of_the_value_or_a_list_holding_it() -> None:
    text, params = sql(Filter.eq("owner.id", 7))
    assert text.count("vs_notes.metadata @>") == 2 and " OR " in text
    assert sorted(map(str, params.values())) == sorted(["{'owner': {'id': 7}}", "{'owner': {'id': [7]}}"])


def test_a_range_on_an_undeclared_field_is_a_jsonpath_match_with_the_value_as_a_variable() -> None:
    text, params = sql(Filter.gte("created_at", HOSTILE))
    assert "jsonb_path_match" in text and HOSTILE not in text
    assert '{"v": ' in str(params) and 'exists($."created_at" ? (@ >= $v))' in params.values()


def test_a_range_on_a_declared_field_uses_its_btree_expression_and_checks_the_type() -> None:
    text, _ = sql(Filter.lt("size", 10), {"size": "integer"})
    expression = str(field_expression(TABLE.c.metadata, "size").compile(dialect=postgresql.dialect()))
    assert f"({expression}) < CAST(" in text and f"jsonb_typeof({expression})" in text


def test_not_counts_a_missing_value_as_no_match_before_negating() -> None:
    text, _ = sql(~Filter.eq("record_id", "1"))
    assert text.startswith("NOT coalesce(vs_notes.record_id = ")


def test_and_and_or_combine_their_parts() -> None:
    text, _ = sql(Filter.eq("a", 1) & (Filter.eq("b", 2) | Filter.eq("c", 3)))
    assert text.count("@>") == 6 and " AND " in text and " OR " in text
