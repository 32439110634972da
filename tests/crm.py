"""A SQL source table of CRM notes for integration tests, a plain SQL client that writes it as psql would (for change
capture: no vectorsync code in the writer), and the chunks a store holds for it: expected from its rows, read back
from pgvector, or stored as a worker would have."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy as sa

from store.connect.postgres import engine_url
from store.settings import Settings, load_settings

__all__ = [
    "OUTBOX",
    "WORDS",
    "CrmTable",
    "Psql",
    "expected_chunks",
    "insert_notes",
    "note",
    "outbox_rows",
    "store_records",
    "stored_chunks",
]

#: Change capture's outbox table (store.capture.sql.OUTBOX), in the source database.
OUTBOX = "vectorsync_outbox"


#: The words CRM notes are made of.
WORDS = [
    "onboarding",
    "rollout",
    "invoice",
    "renewal",
    "pricing",
    "discount",
    "contract",
    "meeting",
    "call",
    "email",
    "churn",
    "support",
    "integration",
    "migration",
    "security",
    "review",
    "budget",
    "approval",
    "timeline",
    "pilot",
]


def note(i: int, *, version: int = 0, rng: random.Random | None = None) -> dict[str, object]:
    """Row ``i`` of a CrmTable at ``version``: the same words each time it is asked for."""
    rng = rng or random.Random(i * 7919 + version)
    body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 120)))
    return {"id": i, "title": f"Note {i} v{version}", "body": body, "kind": rng.choice(["call", "email", "meeting"])}


class CrmTable:
    """A source table of CRM notes: ``id``, ``title``, ``body``, ``kind``, ``updated_at``."""

    def __init__(self, url: str, name: str) -> None:
        self.engine = sa.create_engine(engine_url(url), pool_pre_ping=True)  # survives a database restart
        self.name = name
        self.table = sa.Table(
            name,
            sa.MetaData(),
            sa.Column("id", sa.Integer, primary_key=True),
            sa.Column("title", sa.Text, nullable=False),
            sa.Column("body", sa.Text, nullable=False),
            sa.Column("kind", sa.Text, nullable=False),
            sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        )
        with self.engine.begin() as conn:
            self.table.drop(conn, checkfirst=True)
            self.table.create(conn)

    def insert(self, rows: list[dict[str, Any]]) -> None:
        with self.engine.begin() as conn:
            conn.execute(sa.insert(self.table), rows)

    def update(self, id: int, **values: Any) -> None:
        with self.engine.begin() as conn:
            conn.execute(sa.update(self.table).where(self.table.c.id == id).values(**values, updated_at=sa.func.now()))

    def delete(self, ids: list[int]) -> None:
        with self.engine.begin() as conn:
            conn.execute(sa.delete(self.table).where(self.table.c.id.in_(ids)))

    def rows(self) -> dict[str, dict[str, Any]]:
        with self.engine.connect() as conn:
            return {str(r.id): dict(r._mapping) for r in conn.execute(sa.select(self.table))}

    def close(self) -> None:
        self.engine.dispose()


def store_records(config: Path, name: str, records: Sequence[tuple[str, str, dict[str, Any]]]) -> None:
    """Store each ``(record_id, text, metadata)`` as one chunk of ``name`` (``record_id:0``), embedded with
    the settings' own model, as a worker would have indexed it."""
    from store.embeddings import Embeddings
    from store.vectors import VectorRecord
    from store.vectors.backends import open_store

    settings = load_settings(config)
    embedder = Embeddings.from_settings(settings)
    with open_store(settings, embedder=embedder) as store:
        store.get_collection(name, create=True).upsert_many(
            [
                VectorRecord(f"{rid}:0", embedder.embed(text), text, {"record_id": rid, **metadata})
                for rid, text, metadata in records
            ]
        )


class Psql:
    """A plain client of the source database, as psql or a service in another language writes: autocommit
    statements, or one explicit transaction (``transaction``)."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)

    def run(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(statement, params)
            return cur.fetchall() if cur.description else []

    @contextmanager
    def transaction(self) -> Iterator[Psql]:
        with self.conn.transaction():
            yield self

    def close(self) -> None:
        self.conn.close()


def insert_notes(sql: Psql, table: str, rows: list[dict[str, Any]]) -> None:
    """One INSERT statement for all ``rows`` (arrays unnested server-side, as a bulk loader sends them)."""
    sql.run(
        f'INSERT INTO "{table}" (id, title, body, kind) '
        "SELECT * FROM unnest(%s::int[], %s::text[], %s::text[], %s::text[])",
        ([r["id"] for r in rows], [r["title"] for r in rows], [r["body"] for r in rows], [r["kind"] for r in rows]),
    )


def outbox_rows(sql: Psql, collection: str) -> int:
    """Rows of ``collection`` in the outbox (0 when there is none); inside a transaction, its own rows too."""
    if sql.run(f"SELECT to_regclass('{OUTBOX}')")[0][0] is None:
        return 0
    return int(sql.run(f"SELECT count(*) FROM {OUTBOX} WHERE collection = %s", (collection,))[0][0])


def expected_chunks(
    settings: Settings, collection: str, rows: dict[str, dict[str, Any]]
) -> dict[str, tuple[str, dict[str, Any]]]:
    """What the store must hold for these source rows: chunk id -> (text, metadata)."""
    from worker.pipeline.chunker import Chunker

    chunker = Chunker.from_settings(settings.collections[collection].chunker)
    expected = {}
    for record_id, row in rows.items():
        for index, chunk in enumerate(chunker.split(f"{row['title']}\n\n{row['body']}")):
            metadata = {"kind": row["kind"], "record_id": record_id, "chunk": index}
            expected[f"{record_id}:{index}"] = (chunk.text, metadata)
    return expected


def stored_chunks(url: str, table: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """What the pgvector table holds: chunk id -> (text, metadata)."""
    engine = sa.create_engine(engine_url(url))
    try:
        if not sa.inspect(engine).has_table(table):
            return {}
        with engine.connect() as conn:
            rows = conn.execute(sa.text(f'SELECT id, text, metadata FROM "{table}"')).all()  # test-owned name
    finally:
        engine.dispose()
    return {r.id: (r.text, r.metadata) for r in rows}
