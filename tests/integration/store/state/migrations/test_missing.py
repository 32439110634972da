"""What a revision builds, built only where it is missing: a table is made with its indexes, an existing one gains
only the columns it lacks (its rows kept, the new columns at their defaults), and one that has them all is left
as it is."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext

from store.connect.postgres import engine_url
from store.state.migrations.missing import add_column, ensure_table
from tests.integration.state_db import execute, fresh_database


@pytest.fixture
def database(postgres_url: str) -> Iterator[str]:
    with fresh_database(postgres_url) as url:
        yield url


#: Table ``things`` as a revision declares it.
THINGS = """
    id text NOT NULL,
    kind text NOT NULL DEFAULT 'plain',
    size integer,
    PRIMARY KEY (id)
"""


def migrate(url: str, step: object) -> None:
    """Run ``step`` as a revision's ``upgrade`` would: ``alembic.op`` bound to a connection of ``url``."""
    engine = sa.create_engine(engine_url(url), poolclass=sa.NullPool)
    try:
        with engine.begin() as conn, Operations.context(MigrationContext.configure(conn)):
            step()  # type: ignore[operator]
    finally:
        engine.dispose()


def shape(url: str) -> tuple[set[str], set[str]]:
    """The columns and the indexes of table ``things``."""
    found = execute(url, "SELECT column_name FROM information_schema.columns WHERE table_name = 'things'")
    indexes = execute(url, "SELECT indexname FROM pg_indexes WHERE tablename = 'things'")
    return {row[0] for row in found}, {row[0] for row in indexes}


def test_a_missing_table_is_made_with_its_indexes(database: str) -> None:
    migrate(database, lambda: ensure_table("things", THINGS, {"ix_things_kind": "kind"}))
    assert shape(database) == ({"id", "kind", "size"}, {"things_pkey", "ix_things_kind"})


def test_an_existing_table_gains_the_columns_it_lacks_and_keeps_its_rows(database: str) -> None:
    execute(database, "CREATE TABLE things (id text PRIMARY KEY)")
    execute(database, "INSERT INTO things VALUES ('a')")
    migrate(database, lambda: ensure_table("things", THINGS, {"ix_things_kind": "kind"}))
    assert shape(database) == ({"id", "kind", "size"}, {"things_pkey"})  # an existing table's indexes: its own
    assert execute(database, "SELECT id, kind, size FROM things") == [("a", "plain", None)]
    migrate(database, lambda: add_column("things", "note text NOT NULL DEFAULT ''"))
    migrate(database, lambda: add_column("things", "note text"))  # there: nothing done
    assert execute(database, "SELECT note FROM things") == [("",)]


def test_a_table_that_has_every_column_is_not_altered(database: str) -> None:
    execute(database, "CREATE TABLE things (id text PRIMARY KEY, kind text NOT NULL DEFAULT 'mine', size bigint)")
    migrate(database, lambda: ensure_table("things", THINGS))
    found = execute(
        database,
        "SELECT column_name, data_type, column_default FROM information_schema.columns WHERE table_name = 'things'",
    )
    assert ("kind", "text", "'mine'::text") in found and ("size", "bigint", None) in found
