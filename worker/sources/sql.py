"""A SQL table as a source: a text template over columns, metadata columns, keyset paging by id.

``where`` is a SQL condition from the operator's settings (trusted, like the
URL); record ids and every other value are bound parameters.
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from store.connect.postgres import make_engine, safe_url, transaction
from store.errors import ConfigError, StoreUnavailable
from store.settings import NetworkSettings, SourceSettings
from store.settings.templates import template_fields
from worker.sources.base import SourceRecord

__all__ = ["SqlSource", "json_value"]


def json_value(value: Any) -> Any:
    """A column value as plain JSON: dates as RFC 3339 strings, decimals as numbers."""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():  # NaN, Infinity: a float the metadata check refuses, naming the record
            return float(value)
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, uuid.UUID | bytes):
        return str(value) if isinstance(value, uuid.UUID) else value.hex()
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    return value


def _integer_bound(column_type: Any) -> int | None:
    """2**(bits-1) of an integer column type, None for other types."""
    for kind, bits in ((sa.SmallInteger, 16), (sa.BigInteger, 64), (sa.Integer, 32)):
        if isinstance(column_type, kind):
            return int(2 ** (bits - 1))
    return None


class SqlSource:
    """Rows of one table; the id column gives record ids (as strings) and the paging order."""

    def __init__(self, settings: SourceSettings, *, network: NetworkSettings | None = None) -> None:
        """The table ``settings`` names (``[collections.NAME.source]``; its ``kind`` is not read). Raises ConfigError
        for a missing url, table or text, or a table or column not in the database; StoreUnavailable."""
        url, table, text = settings.url, settings.table, settings.text
        if not (url and table and text):
            missing = [key for key in ("url", "table", "text") if not getattr(settings, key)]
            raise ConfigError(f"a SQL source needs source.{', source.'.join(missing)}")
        self.engine = make_engine(url, setting="source.url", network=network, pool_pre_ping=True)
        self.safe_url = safe_url(url)
        self.template = text
        try:
            self.table = sa.Table(table, sa.MetaData(), autoload_with=self.engine)
        except sa.exc.NoSuchTableError:
            raise ConfigError(f"source table {table!r} does not exist in {self.safe_url} (source.table)") from None
        except sa.exc.DBAPIError as exc:
            raise StoreUnavailable(f"source database {self.safe_url} failed: {exc.orig}") from exc
        self.id_column = self._column(settings.id, "source.id")
        self.text_columns = [self._column(name, "source.text") for name in template_fields(text)]
        self.metadata_columns = [self._column(name, "source.metadata") for name in settings.metadata]
        updated_at, where = settings.updated_at, settings.where
        self.updated_at = self._column(updated_at, "source.updated_at") if updated_at else None
        self.where = sa.text(where) if where else sa.true()
        self._id_type = self._python_type(self.id_column)

    def _column(self, name: str, setting: str) -> sa.Column[Any]:
        if name not in self.table.c:
            known = ", ".join(self.table.c.keys())
            raise ConfigError(f"{setting}: column {name!r} is not in table {self.table.name!r} (columns: {known})")
        return self.table.c[name]

    @staticmethod
    def _python_type(column: sa.Column[Any]) -> type:
        try:
            return column.type.python_type
        except NotImplementedError:
            return str

    def _key(self, record_id: str) -> Any:
        """A string id in the id column's own type; None when it cannot be one (not a number, out of the
        column's range): no row has it, so the record counts as gone."""
        try:
            key: Any = self._id_type(record_id) if self._id_type is not str else record_id
        except (TypeError, ValueError, ArithmeticError):
            return None
        bound = _integer_bound(self.id_column.type)
        if bound is not None and not -bound <= key < bound:
            return None
        return key

    def _run(self, query: sa.Select[Any]) -> Sequence[sa.Row[Any]]:
        """One read, as one statement outside a transaction: no BEGIN and ROLLBACK around it (a single
        statement sees one snapshot all the same)."""
        with transaction(
            self.engine.execution_options(isolation_level="AUTOCOMMIT"), f"source database {self.safe_url}"
        ) as conn:
            return conn.execute(query).all()

    def fetch(self, ids: Sequence[str]) -> dict[str, SourceRecord]:
        keys = [k for k in (self._key(i) for i in ids) if k is not None]
        if not keys:
            return {}
        columns = {self.id_column, *self.text_columns, *self.metadata_columns}
        if self.updated_at is not None:
            columns.add(self.updated_at)
        rows = self._run(sa.select(*columns).where(self.id_column.in_(keys), self.where))
        return {str(row._mapping[self.id_column]): self._record(row._mapping) for row in rows}

    def _record(self, row: Mapping[Any, Any]) -> SourceRecord:
        values = {c.name: ("" if row[c] is None else row[c]) for c in self.text_columns}
        return SourceRecord(
            id=str(row[self.id_column]),
            text=self.template.format_map(values),
            metadata={c.name: json_value(row[c]) for c in self.metadata_columns},
            stamp=self._stamp(row[self.updated_at]) if self.updated_at is not None else "",
        )

    @staticmethod
    def _stamp(value: Any) -> str:
        """The ``updated_at`` value as text; NULL stamps nothing (such a row is always re-read)."""
        return "" if value is None else str(json_value(value))

    def page_ids(self, *, after: str | None, limit: int) -> list[str]:
        query = sa.select(self.id_column).where(self.where)
        if after is not None:
            query = query.where(self.id_column > self._key(after))
        rows = self._run(query.order_by(self.id_column).limit(limit))
        return [str(row[0]) for row in rows]

    def page_stamps(self, *, after: str | None, limit: int) -> list[tuple[str, str]]:
        """(id, updated_at as text) in id order; without ``source.updated_at`` every stamp is ""."""
        if self.updated_at is None:
            return [(record_id, "") for record_id in self.page_ids(after=after, limit=limit)]
        query = sa.select(self.id_column, self.updated_at).where(self.where)
        if after is not None:
            query = query.where(self.id_column > self._key(after))
        rows: Sequence[Any] = self._run(query.order_by(self.id_column).limit(limit))
        return [(str(row[0]), self._stamp(row[1])) for row in rows]

    def close(self) -> None:
        self.engine.dispose()
