"""The PostgreSQL ledger's statements: each one compiles for PostgreSQL, the driver's own take named parameters,
and a run prefix matches its ``%``, ``_`` and ``/`` as written (they run against PostgreSQL in
tests/integration/store/state/ledger/test_postgres.py)."""

from __future__ import annotations

import re

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

import store.state.ledger.statements as statements
from store.state.ledger.statements import prefix_pattern


def test_a_run_prefix_is_a_like_pattern_of_its_characters_as_written() -> None:
    assert prefix_pattern("ab12") == "ab12%"
    assert prefix_pattern("50%_a/b") == "50/%/_a//b%"


def test_every_statement_compiles_for_postgresql_and_binds_its_values() -> None:
    named = {name: getattr(statements, name) for name in statements.__all__ if name.isupper()}
    compiled = 0
    for name, value in named.items():
        for statement in value if isinstance(value, tuple) else (value,):
            if isinstance(statement, str):  # psycopg text: named placeholders only
                assert re.findall(r"%\((\w+)\)s", statement), name
                continue
            assert statement.compile(dialect=postgresql.dialect()).params is not None, name
            compiled += 1
    assert compiled >= 30
    assert isinstance(statements.RUN, sa.Select) and "FOR UPDATE" in str(
        statements.LOCK_RUN_STATUS.compile(dialect=postgresql.dialect())
    )
