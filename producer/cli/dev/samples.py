"""The sample rows of ``vectorsync dev`` (``corpus``) in their tables, kept across runs: a run puts back only the
rows the demo owns (missing, or as the demo itself last wrote them, by a digest kept in ``OWNED_TABLE``) and keeps
every row someone changed or added, saying which it put back and which it kept."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from producer.cli.dev.corpus import CRM_TABLE, TOPICS_TABLE, crm_rows, topic_rows

__all__ = ["OWNED_TABLE", "Loaded", "digest", "load_corpus", "own"]

#: The digest of each sample row as the demo last wrote it: a row that differs was changed by someone else.
OWNED_TABLE = "vectorsync_dev_samples"


@dataclass(frozen=True)
class Loaded:
    """What ``load_corpus`` did: sample rows per table, and per table the ids it put back (missing, or holding
    what the demo itself last wrote) and the ids it kept because someone changed them."""

    counts: dict[str, int]
    restored: dict[str, list[str]] = field(default_factory=dict)
    kept: dict[str, list[str]] = field(default_factory=dict)


def digest(row: Mapping[Any, Any], columns: Sequence[str]) -> str:
    """A row's content as the demo compares it: its ``columns``, datetimes in UTC (a naive one taken as UTC)."""
    values = []
    for name in columns:
        value = row[name]
        if isinstance(value, dt.datetime):
            value = (value.astimezone(dt.UTC) if value.tzinfo else value.replace(tzinfo=dt.UTC)).isoformat()
        values.append(str(value))
    return hashlib.sha256(json.dumps(values).encode()).hexdigest()


def _tables() -> tuple[sa.MetaData, sa.Table, sa.Table, sa.Table]:
    metadata = sa.MetaData()
    topics = sa.Table(
        TOPICS_TABLE,
        metadata,
        sa.Column("topic", sa.Text, primary_key=True),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("length", sa.Text, nullable=False),
        _stamp(),
    )
    notes = sa.Table(
        CRM_TABLE,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        _stamp(),
    )
    owned = sa.Table(
        OWNED_TABLE,
        metadata,
        sa.Column("source", sa.Text, primary_key=True),
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("digest", sa.Text, nullable=False),
    )
    return metadata, topics, notes, owned


def _stamp() -> sa.Column[Any]:
    return sa.Column(
        "updated_at", sa.DateTime(timezone=True), server_default=sa.func.current_timestamp(), nullable=False
    )


def _content(table: sa.Table) -> list[str]:
    return [c.name for c in table.columns if c.name != "updated_at"]


def _key(table: sa.Table) -> sa.Column[Any]:
    return next(iter(table.primary_key.columns))


def load_corpus(url: str) -> Loaded:
    """Create both tables in the database at ``url`` where missing and put in the sample rows the demo owns:
    those missing, and those holding what the demo itself last wrote (its digest is kept in ``OWNED_TABLE``). A
    row someone changed (with psql, say) is kept as it is, and so is a row someone added; ``--fresh`` starts over.
    """
    from store.connect.postgres import make_engine

    metadata, topics, notes, owned = _tables()
    engine = make_engine(url, setting="the demo database")
    loaded = Loaded(counts={})
    try:
        with engine.begin() as conn:
            metadata.create_all(conn)
            for table, rows in ((topics, topic_rows()), (notes, crm_rows())):
                _load(conn, table, owned, rows, loaded)
    finally:
        engine.dispose()
    return loaded


def _load(conn: sa.Connection, table: sa.Table, owned: sa.Table, rows: list[dict[str, Any]], loaded: Loaded) -> None:
    key, columns = _key(table), _content(table)
    present = {str(r._mapping[key.name]): digest(r._mapping, columns) for r in conn.execute(sa.select(table))}
    mine = dict(conn.execute(sa.select(owned.c.id, owned.c.digest).where(owned.c.source == table.name)).all())
    restored, kept, inserts = [], [], []
    for row in rows:
        id, wanted = str(row[key.name]), digest(row, columns)
        if id not in present:
            inserts.append(row)
            restored.append(id)
        elif present[id] == wanted:
            pass
        elif present[id] == mine.get(id):  # as the demo left it: the demo's own row, put back
            values = {k: v for k, v in row.items() if k != key.name}
            conn.execute(sa.update(table).where(key == row[key.name]).values(**values, updated_at=sa.func.now()))
            restored.append(id)
        else:
            kept.append(id)
            continue
        mine[id] = wanted
    if inserts:
        conn.execute(sa.insert(table), inserts)
    conn.execute(sa.delete(owned).where(owned.c.source == table.name))
    conn.execute(sa.insert(owned), [{"source": table.name, "id": id, "digest": d} for id, d in mine.items()])
    loaded.counts[table.name] = len(rows)
    if present and restored:  # a first load restores nothing: it loads
        loaded.restored[table.name] = restored
    if kept:
        loaded.kept[table.name] = kept


def own(conn: sa.Connection, table_name: str, id: str) -> None:
    """Record the row ``id`` of ``table_name`` as the demo wrote it (the demo's own ``UPDATE``), so that the next
    run puts the sample back instead of keeping it as someone's change."""
    metadata = _tables()[0]
    table = metadata.tables[table_name]
    key = _key(table)
    row = conn.execute(sa.select(table).where(sa.cast(key, sa.Text) == id)).one()
    owned = metadata.tables[OWNED_TABLE]
    where = sa.and_(owned.c.source == table_name, owned.c.id == id)
    conn.execute(sa.update(owned).where(where).values(digest=digest(row._mapping, _content(table))))
