"""The registry of generations in the state database, shared by every worker and app.

Tables (``store.state.tables``; the schema is brought up to date on opening, ``store.state.database``):
``vectorsync_aliases`` (a collection and the generation it reads) and
``vectorsync_generations`` (each generation's chain, models and size). A
switch is one ``UPDATE`` of the alias row, compared and set: every reader sees
the old generation or the new one, never neither.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import sqlalchemy as sa

from store.connect.postgres import advisory_lock
from store.errors import ConfigError
from store.state.clock import now
from store.state.database import StateDatabase
from store.state.generations.base import Alias, Generation, building_error, live_error
from store.state.tables import aliases, generations

__all__ = ["PostgresGenerations"]


def _generation(row: sa.Row[Any]) -> Generation:
    return Generation(
        row.collection, row.number, tuple(row.chain), row.models, row.dimensions, row.run_id, row.created_at
    )


class PostgresGenerations:
    """Aliases in PostgreSQL; see the module docstring. ``database``: the ledger's, shared (None: its own at
    ``url``, its schema brought up to date)."""

    def __init__(self, url: str | None = None, *, database: StateDatabase | None = None) -> None:
        """Raises ConfigError (no URL, not PostgreSQL, a schema newer than this vectorsync) and StoreUnavailable."""
        self._owned = database is None
        self.database = database if database is not None else StateDatabase.open(url, pool_size=2)
        self.engine = self.database.engine
        self.safe_url = self.database.safe_url

    @contextmanager
    def _transaction(self) -> Iterator[sa.Connection]:
        with self.database.transaction() as conn:
            yield conn

    def _read(self, conn: sa.Connection, where: sa.ColumnElement[bool] | None = None) -> list[Alias]:
        """The aliases ``where`` selects, in one statement (a search reads one before each query)."""
        rows = conn.execute(
            sa.select(aliases.c.live, aliases.c.switched_at, generations)
            .join(generations, generations.c.collection == aliases.c.collection)
            .where(where if where is not None else sa.true())
            .order_by(generations.c.collection, generations.c.number)
        ).all()
        found: dict[str, Alias] = {}
        for row in rows:
            alias = found.get(row.collection) or Alias(row.collection, row.live, (), row.switched_at)
            found[row.collection] = replace(alias, generations=(*alias.generations, _generation(row)))
        return list(found.values())

    def alias(self, collection: str) -> Alias | None:
        with self.database.reading() as conn:
            found = self._read(conn, aliases.c.collection == collection)
        return found[0] if found else None

    def aliases(self) -> list[Alias]:
        with self.database.reading() as conn:
            return self._read(conn)

    def begin(self, first: Generation, new: Generation) -> None:
        with self._transaction() as conn:
            self._lock(conn, new.collection)
            found = self._read(conn, aliases.c.collection == new.collection)
            if not found:
                conn.execute(sa.insert(aliases).values(collection=new.collection, live=first.number))
                self._insert(conn, first)
            elif found[0].building is not None:
                raise ConfigError(building_error(found[0]))
            elif any(g.number == new.number for g in found[0].generations):
                raise ConfigError(f"generation {new.name} exists already: drop it first")
            self._insert(conn, new)

    @staticmethod
    def _lock(conn: sa.Connection, collection: str) -> None:
        """The alias's lock, held to the end of the transaction: begin, switch and forget take turns."""
        advisory_lock(conn, "vectorsync:alias/" + collection)

    @staticmethod
    def _insert(conn: sa.Connection, generation: Generation) -> None:
        conn.execute(
            sa.insert(generations).values(
                collection=generation.collection,
                number=generation.number,
                chain=list(generation.chain),
                models=dict(generation.models),
                dimensions=generation.dimensions,
                run_id=generation.run_id,
                created_at=now(),
            )
        )

    def set_run(self, collection: str, number: int, run_id: str) -> None:
        with self._transaction() as conn:
            conn.execute(
                sa.update(generations)
                .where(generations.c.collection == collection, generations.c.number == number)
                .values(run_id=run_id)
            )

    def switch(self, collection: str, number: int, *, expected: int) -> bool:
        with self._transaction() as conn:
            self._lock(conn, collection)  # as forget does: never a switch to a generation being forgotten
            switched = conn.execute(
                sa.update(aliases)
                .where(
                    aliases.c.collection == collection,
                    aliases.c.live == expected,
                    sa.exists().where(generations.c.collection == collection, generations.c.number == number),
                )
                .values(live=number, switched_at=now())
            ).rowcount
        return bool(switched)

    def forget(self, collection: str, number: int | None = None) -> None:
        with self._transaction() as conn:
            self._lock(conn, collection)
            if number is None:
                conn.execute(sa.delete(aliases).where(aliases.c.collection == collection))
                conn.execute(sa.delete(generations).where(generations.c.collection == collection))
                return
            found = self._read(conn, aliases.c.collection == collection)
            if found and found[0].live == number:
                raise ConfigError(live_error(found[0]))
            conn.execute(
                sa.delete(generations).where(generations.c.collection == collection, generations.c.number == number)
            )

    def close(self) -> None:
        if self._owned:
            self.database.close()
