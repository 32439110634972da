"""The state database: one engine from ``state.url``, its schema at this vectorsync's version.

Everything that opens the state database (the ledger, the generations registry, ``vectorsync init``, a
worker's start) comes through ``StateDatabase.open``. It reads the schema version first (two catalog
reads, no lock, no Alembic), and only a database that is behind is upgraded (``store.state.migrations``),
in one transaction under the advisory lock ``vectorsync:state``, which processes starting together take
in turn. A database at a version this vectorsync does not know was upgraded by a newer one:
``SchemaTooNew``, so a worker refuses to start on it.

    database = StateDatabase.open(settings.state_url)      # current, or refused
    upgrade_state(settings)    # Upgrade(where='postgresql+psycopg://...', before=None, after='0001')
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sqlalchemy as sa

from store.connect.postgres import advisory_lock, make_engine, safe_url, transaction
from store.errors import ConfigError, SchemaTooNew
from store.state import migrations

if TYPE_CHECKING:
    from store.settings import NetworkSettings, Settings

__all__ = ["NO_STATE_DATABASE", "STATE_LOCK", "StateDatabase", "Upgrade", "upgrade_state"]

#: The advisory lock every schema change of the state database is made under (releases before the
#: migrations took it too, to create their tables).
STATE_LOCK = "vectorsync:state"
NO_STATE_DATABASE = (
    "no state database: set state.url (VECTORSYNC_STATE__URL) to a PostgreSQL URL, "
    "or use the pgvector store, whose database is the default"
)


@dataclass(frozen=True, slots=True)
class Upgrade:
    """The state database (its URL, no password), the schema version an upgrade found there (None: never
    migrated) and the one it left."""

    where: str
    before: str | None
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


class StateDatabase:
    """The state database's engine, and its URL without the password for messages."""

    def __init__(self, engine: sa.Engine, url: str) -> None:
        self.engine = engine
        self.safe_url = safe_url(url)

    @classmethod
    def connect(cls, url: str | None, *, pool_size: int = 5, network: NetworkSettings | None = None) -> StateDatabase:
        """The state database at ``url``, its schema as it is (``upgrade`` brings it to this version); its
        connections notice a silent server as ``network`` says (None: the defaults).

        Raises ConfigError: no URL, a malformed one, not PostgreSQL.
        """
        if not url:
            raise ConfigError(NO_STATE_DATABASE)
        database = cls(
            make_engine(url, setting="state.url", network=network, pool_size=pool_size, pool_pre_ping=True), url
        )
        if database.engine.dialect.name != "postgresql":
            database.close()
            raise ConfigError(f"state.url {database.safe_url!r} is not PostgreSQL; the state needs PostgreSQL locks")
        return database

    @classmethod
    def open(cls, url: str | None, *, pool_size: int = 5, network: NetworkSettings | None = None) -> StateDatabase:
        """The state database at ``url``, its schema brought to this vectorsync's version.

        Raises ConfigError (no URL, not PostgreSQL), SchemaTooNew (a newer vectorsync upgraded it) and
        StoreUnavailable (it cannot be reached).
        """
        database = cls.connect(url, pool_size=pool_size, network=network)
        try:
            database.upgrade()
        except BaseException:
            database.close()
            raise
        return database

    @contextmanager
    def transaction(self) -> Iterator[sa.Connection]:
        """A connection in a transaction; driver errors become StoreUnavailable or StoreError."""
        with transaction(self.engine, f"state database {self.safe_url}") as conn:
            yield conn

    @contextmanager
    def reading(self) -> Iterator[sa.Connection]:
        """A connection outside a transaction, for one statement that reads (it sees one snapshot all the
        same): no BEGIN and COMMIT round trips around it. Driver errors as ``transaction``."""
        with transaction(
            self.engine.execution_options(isolation_level="AUTOCOMMIT"), f"state database {self.safe_url}"
        ) as conn:
            yield conn

    def version(self) -> str | None:
        """The schema version the database is at (None: never migrated). Raises SchemaTooNew."""
        with self.transaction() as conn:
            return self._version(conn)

    def upgrade(self) -> Upgrade:
        """Bring the schema to this vectorsync's version; a database already there takes no lock.

        Raises SchemaTooNew, StoreUnavailable.
        """
        before = self.version()
        if before == migrations.HEAD:
            return Upgrade(self.safe_url, before, before)
        with self.transaction() as conn:
            advisory_lock(conn, STATE_LOCK)
            before = self._version(conn)  # again, under the lock: another process may have just upgraded it
            if before != migrations.HEAD:
                migrations.upgrade(conn)
        return Upgrade(self.safe_url, before, migrations.HEAD)

    def _version(self, conn: sa.Connection) -> str | None:
        found = migrations.current(conn)
        if found == (migrations.HEAD,):
            return migrations.HEAD
        unknown = [v for v in found if v not in migrations.known()]
        if unknown:
            raise SchemaTooNew(
                f"the state database at {self.safe_url} is at schema version {', '.join(unknown)}, newer than "
                f"this vectorsync knows ({migrations.HEAD}): upgrade vectorsync on this machine"
            )
        return ", ".join(found) or None

    def close(self) -> None:
        self.engine.dispose()


def upgrade_state(settings: Settings) -> Upgrade | None:
    """Bring the state database the settings name to this vectorsync's schema, as a worker's start and
    ``vectorsync init`` do, and tell what was done. None: there is no state database (the memory store).

    Raises ConfigError, SchemaTooNew, StoreUnavailable.
    """
    if settings.state_url is None:
        return None
    database = StateDatabase.connect(settings.state_url, pool_size=1, network=settings.network)
    try:
        return database.upgrade()
    finally:
        database.close()
