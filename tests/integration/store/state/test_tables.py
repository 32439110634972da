"""The migrations and the code agree: the head's schema is what ``store.state.tables`` declares, and an
upgrade from any earlier schema ends with the same tables as a fresh install."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from store.connect.postgres import engine_url
from store.state import migrations, tables
from store.state.database import StateDatabase
from tests.integration.state_db import catalog, fresh_database, load_schema


@pytest.fixture
def database(postgres_url: str) -> Iterator[str]:
    with fresh_database(postgres_url) as url:
        yield url


def upgraded(url: str, schema: str | None = None) -> str:
    """``url`` upgraded to the head, over the fixture ``schema`` when one is named."""
    if schema is not None:
        load_schema(url, schema)
    StateDatabase.open(url).close()
    return url


def differences(url: str, metadata: sa.MetaData) -> list[Any]:
    """What Alembic's autogenerate would change to make the database ``metadata``: types, nullability,
    server defaults, indexes, tables; the version table aside."""
    engine = sa.create_engine(engine_url(url), poolclass=sa.NullPool)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn,
                opts={
                    "compare_type": True,
                    "compare_server_default": True,
                    "include_name": lambda name, kind, _parent: kind != "table" or name != migrations.VERSION_TABLE,
                },
            )
            return list(compare_metadata(context, metadata))
    finally:
        engine.dispose()


def test_head_is_the_newest_revision_shipped() -> None:
    script = migrations.script()
    assert script.get_current_head() == migrations.HEAD
    assert migrations.known() == {"0001", "0002"}
    assert [r.revision for r in script.walk_revisions()] == ["0002", "0001"]


def test_the_migrations_build_what_the_tables_declare(database: str) -> None:
    assert differences(upgraded(database), tables.metadata) == []


@pytest.mark.parametrize("schema", ["main", "first"])
def test_upgrading_an_older_schema_builds_what_the_tables_declare(database: str, schema: str) -> None:
    assert differences(upgraded(database, schema), tables.metadata) == []


def test_the_comparison_sees_drift(database: str) -> None:
    """A control: a column, a default or an index the migrations lack is found (else the tests above prove
    nothing)."""
    drifted = sa.MetaData()
    for table in tables.metadata.tables.values():
        table.to_metadata(drifted)
    drifted.tables["vectorsync_ledger"].append_column(sa.Column("extra", sa.Text))
    drifted.tables["vectorsync_runs"].c.kind.server_default = sa.DefaultClause("other")
    sa.Index("ix_failures_run", drifted.tables["vectorsync_failures"].c.run_id)
    found = {diff[0] if isinstance(diff, tuple) else diff[0][0] for diff in differences(upgraded(database), drifted)}
    assert found == {"add_column", "modify_default", "add_index"}


def test_every_way_up_ends_with_the_same_tables(postgres_url: str) -> None:
    """Fresh, from main's schema and from the first release's, the catalog tells the same tables: columns,
    types, nullability, defaults, constraints and indexes (the order of columns aside)."""
    found = {}
    for schema in (None, "main", "first"):
        with fresh_database(postgres_url) as url:
            found[schema] = catalog(upgraded(url, schema))
    assert found["main"] == found[None]
    assert found["first"] == found[None]
    assert ("vectorsync_runs", "kind", "text", True, "'reindex'::text") in found[None]["columns"]
    assert {index[1] for index in found[None]["indexes"]} >= {"ix_vectorsync_runs_collection", "vectorsync_ledger_pkey"}
