"""A collection's capture target, read from its settings and the source database's catalog, with the checks
that refuse what triggers cannot follow (no unique id, an id type that does not round-trip as text)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from store.capture.sql import Target, quote
from store.errors import ConfigError
from store.settings import Settings, SourceSettings
from store.settings.templates import template_fields

__all__ = ["captured", "read_target", "sql_sources", "where_columns"]

_STRING_LITERAL = re.compile(r"'(?:[^']|'')*'")
_IDENTIFIER = re.compile(r'"((?:[^"]|"")+)"|\b([A-Za-z_][A-Za-z0-9_$]*)\b')


def sql_sources(settings: Settings) -> dict[str, SourceSettings]:
    """The declared collections whose records a PostgreSQL table holds: the ones capture can follow."""
    return {
        name: c.source
        for name, c in settings.collections.items()
        if c.source.kind == "sql"
        and c.source.url
        and c.source.table
        and c.source.url.split("://", 1)[0].split("+", 1)[0] in ("postgres", "postgresql")
    }


def captured(settings: Settings) -> dict[str, SourceSettings]:
    """The declared collections that ask for capture (``source.capture = "trigger"``)."""
    return {name: source for name, source in sql_sources(settings).items() if source.capture == "trigger"}


def where_columns(where: str | None, columns: Iterable[str]) -> set[str]:
    """The table's columns that ``where`` may read: every identifier in it that names one (outside string
    literals). Taking a word that only looks like a column costs a no-op enqueue, never a missed change."""
    if not where:
        return set()
    known = set(columns)
    words = {
        quoted.replace('""', '"') if quoted else bare.lower()  # PostgreSQL folds unquoted names
        for quoted, bare in _IDENTIFIER.findall(_STRING_LITERAL.sub(" ", where))
    }
    return words & known


def _id_type_error(column_type: Any) -> str | None:
    """Why ids of this type cannot be captured (their text in SQL and in Python differ), or None."""
    if isinstance(column_type, sa.Integer | sa.Uuid) or (
        isinstance(column_type, sa.String) and not isinstance(column_type, sa.CHAR)
    ):
        return None
    return f"has type {column_type}, whose text in SQL may differ from the record id the worker reads"


def read_target(name: str, source: SourceSettings, conn: sa.Connection) -> Target:
    """The capture target of collection ``name``. Raises ConfigError naming the table, the column and the fix."""
    if source.kind != "sql" or not source.table or not source.text:
        raise ConfigError(
            f"collections.{name}.source is not a SQL table with a text template: change capture "
            "follows SQL sources only (source.kind = 'sql', with table and text)"
        )
    found = conn.execute(
        sa.text(
            "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE c.oid = to_regclass(:name)"
        ),
        {"name": quote(source.table)},
    ).first()
    if found is None:
        raise ConfigError(
            f"collections.{name}.source.table: table {source.table!r} does not exist in the source "
            "database: create it, or fix the name"
        )
    schema, table = str(found[0]), str(found[1])
    inspector = sa.inspect(conn)
    columns = {c["name"]: c for c in inspector.get_columns(table, schema=schema)}
    if source.id not in columns:
        raise ConfigError(
            f"collections.{name}.source.id: column {source.id!r} is not in table {table!r} "
            f"(columns: {', '.join(columns)})"
        )
    problem = _id_type_error(columns[source.id]["type"])
    if problem is None and not _unique(inspector, table, schema, source.id):
        problem = "is neither the primary key nor alone under a unique constraint or index"
    if problem is not None:
        raise ConfigError(
            f"collections.{name}.source.id: column {source.id!r} of table {table!r} {problem}, so "
            "change capture cannot name the records it changes: set source.id to an integer, text "
            f"or uuid column that is unique (e.g. ALTER TABLE {quote(table)} ADD PRIMARY KEY "
            f"({quote(source.id)}) for a unique-less one), or set capture = 'off' and rely on "
            "reconcile sweeps with source.updated_at"
        )
    read = [*template_fields(source.text), *source.metadata, *sorted(where_columns(source.where, columns))]
    missing = [column for column in read if column not in columns]
    if missing:
        raise ConfigError(
            f"collections.{name}.source reads column {missing[0]!r}, which table {table!r} lacks "
            f"(columns: {', '.join(columns)}): fix source.text, source.metadata or source.where"
        )
    compared = tuple(dict.fromkeys(c for c in read if c != source.id))
    _check_dollar_quote([schema, table, *columns])
    role = str(conn.execute(sa.text("SELECT current_user")).scalar_one())
    return Target(
        collection=name,
        schema=schema,
        table=table,
        id=source.id,
        compared=compared,
        notify=source.capture_notify,
        relay_role=role,
        outbox_schema=outbox_schema(conn),
    )


def outbox_schema(conn: sa.Connection) -> str:
    """The schema the outbox is in for this role: its ``current_schema()``. Raises ConfigError when none is."""
    from store.capture.sql import OUTBOX_SCHEMA

    found = conn.execute(OUTBOX_SCHEMA).scalar()
    if found is None:
        raise ConfigError(
            "the role of source.url has no schema to keep the change-capture outbox in: its "
            "search_path names no existing schema. Create one, or ALTER ROLE ... SET search_path"
        )
    return str(found)


def _check_dollar_quote(names: list[str]) -> None:
    """The trigger function's body is dollar-quoted: a name holding the quote would end it early."""
    for name in names:
        if "$vectorsync$" in name:
            raise ConfigError(
                f"name {name!r} holds '$vectorsync$', which change capture's trigger function cannot quote: rename it"
            )


def _unique(inspector: Any, table: str, schema: str, column: str) -> bool:
    if inspector.get_pk_constraint(table, schema=schema).get("constrained_columns") == [column]:
        return True
    if any(c["column_names"] == [column] for c in inspector.get_unique_constraints(table, schema=schema)):
        return True
    return any(i.get("unique") and i["column_names"] == [column] for i in inspector.get_indexes(table, schema=schema))
