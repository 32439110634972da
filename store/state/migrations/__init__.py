"""The state database's migrations: Alembic revisions shipped in this package and run in code.

There is no alembic.ini: ``upgrade(conn)`` builds the Alembic config here, points ``script_location`` at
this folder and hands ``env.py`` the caller's connection, so the caller's transaction (and the advisory
lock it holds) covers the whole upgrade, and PostgreSQL's transactional DDL makes it all or nothing.
Versions are kept in ``vectorsync_schema_version``, a table of vectorsync's own: an application's
``alembic_version`` in the same database is never read or written.

Revisions (``versions/``): 0001 the state tables, each made where it is missing, so a database made before
there were migrations is adopted with its rows (the columns its tables lack added, with their defaults);
0002 the batch lane's (a run's lane, its texts, provider jobs, waiting batches and next look). A new
revision: copy the latest file, number it, point its ``down_revision`` at the latest, set ``HEAD``, and change
``store.state.tables`` to match (tests compare the head's schema with those tables, and ``HEAD`` with the files).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory

__all__ = ["FOLDER", "HEAD", "VERSION_TABLE", "current", "known", "script", "upgrade"]

#: Where vectorsync records the state database's revision (never Alembic's default ``alembic_version``).
VERSION_TABLE = "vectorsync_schema_version"
#: The newest revision in ``versions/``: read without loading Alembic, so a process whose database is
#: current (nearly always) never imports it. A test checks it against the script directory.
HEAD = "0002"
#: This folder: Alembic's script location.
FOLDER = Path(__file__).resolve().parent

_READ = sa.text(f"SELECT version_num FROM {VERSION_TABLE} ORDER BY version_num")  # a constant, no user value
#: A query of pg_class: opening a table makes PostgreSQL take in the catalog changes committed meanwhile. A bare
#: ``SELECT to_regclass(...)`` opens none, and answers from a cache that waiting for an advisory lock does not
#: refresh: a process that waited for another's upgrade did not see its version table and ran it again.
_EXISTS = sa.text(
    "SELECT EXISTS (SELECT FROM pg_catalog.pg_class WHERE relname = :table AND relkind IN ('r', 'p') "
    "AND relnamespace = (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = current_schema()))"
)


def current(conn: sa.Connection) -> tuple[str, ...]:
    """The revisions the database is at: empty for one never migrated (fresh, or made before migrations)."""
    if not conn.execute(_EXISTS, {"table": VERSION_TABLE}).scalar_one():
        return ()
    return tuple(conn.execute(_READ).scalars())


@cache
def script() -> ScriptDirectory:
    """The revisions this vectorsync ships (loads Alembic: only when a database is not at ``HEAD``)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(FOLDER))


def known() -> frozenset[str]:
    """The ids of every revision this vectorsync ships."""
    return frozenset(revision.revision for revision in script().walk_revisions())


def upgrade(conn: sa.Connection, target: str = "head") -> None:
    """Run the revisions ``conn``'s database lacks, up to ``target`` (a test's older head), inside the transaction
    ``conn`` is in."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(FOLDER).replace("%", "%%"))  # ConfigParser interpolates %
    config.attributes["connection"] = conn
    command.upgrade(config, target)
