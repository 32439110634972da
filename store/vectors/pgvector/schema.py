"""The table of a pgvector collection: its columns and indexes, built and checked.

Table ``<prefix><name>``: ``id`` (primary key), ``record_id`` (btree),
``chunk``, ``embedding`` (``vector(d)``; ``halfvec(d)`` with ``vectors.precision = "half"`` and always above 2000
dimensions; HNSW for the metric), ``text``, ``metadata`` (jsonb, GIN),
``model``, ``updated_at``, ``text_hash`` (the sha256 of ``text`` as UTF-8, 32 bytes: ``text_digest``; btree
with ``model``, for the vectors stored for a text), and for keyword search ``keywords`` (jsonb ``{term: tf}``, GIN) and
``keyword_length``, with the statistics table ``<table>_kwstats`` (``keywords.py``) and the segments tables
(``segments.py``). Each declared indexed field adds a btree index on ``metadata -> 'field'`` (named
``<table>_by_<hash of the field>``).

A table made here starts at the current schema version; an older one is upgraded when it is opened, by the
numbered steps of ``upgrades.py``, in one transaction under the table's advisory lock.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import sqlalchemy as sa
from pgvector.sqlalchemy import HALFVEC, VECTOR
from psycopg import sql
from sqlalchemy.dialects.postgresql import BYTEA, JSONB, TIMESTAMP

from store.connect.postgres import advisory_lock, driver
from store.errors import ConfigError
from store.vectors.base import Metric
from store.vectors.pgvector.keywords import stats_table
from store.vectors.pgvector.segments import posting_tables
from store.vectors.pgvector.upgrades import (
    analyzed_by,
    mark_analyzer,
    record_rules,
    record_version,
    recorded_rules,
    shown_rules,
    upgrade,
)
from store.vectors.rules import Declared, Rules, settle, terms_by

__all__ = [
    "MAX_HALFVEC_DIMENSIONS",
    "MAX_VECTOR_DIMENSIONS",
    "Precision",
    "Schema",
    "bulk_indexes",
    "embedding_type",
    "ensure_field_indexes",
    "field_index_name",
]

#: Above this many dimensions the column is halfvec: HNSW indexes vector only up to 2000.
MAX_VECTOR_DIMENSIONS = 2000
#: halfvec's HNSW limit.
MAX_HALFVEC_DIMENSIONS = 4000

#: The longest table name whose index names ("<table>_embedding_idx") fit PostgreSQL's 63 bytes.
MAX_TABLE_NAME = 63 - len("_embedding_idx")
_OPS = {"cosine": "cosine", "dot": "ip", "euclidean": "l2"}
_FIX = "drop the table or use another collection name"
_TYPE = re.compile(r"(?P<kind>vector|halfvec)\((?P<dimensions>\d+)\)")

#: How embeddings are stored: ``vector`` (4 bytes a dimension) or ``halfvec`` (2 bytes), ``vectors.precision``.
Precision = Literal["float", "half"]


@dataclass
class Schema:
    """How every collection table of one store looks: vector type, metric, HNSW parameters."""

    dimensions: int
    metric: Metric
    hnsw_m: int
    hnsw_ef_construction: int
    table_prefix: str
    precision: Precision = "float"
    _metadata: sa.MetaData = field(default_factory=sa.MetaData, repr=False)

    def __post_init__(self) -> None:
        if self.dimensions > MAX_HALFVEC_DIMENSIONS:
            raise ConfigError(
                f"vectors.dimensions = {self.dimensions} is more than pgvector can index "
                f"({MAX_HALFVEC_DIMENSIONS} as halfvec): use a model with fewer dimensions"
            )

    @property
    def half(self) -> bool:
        """Whether the column is halfvec: asked for, or forced above 2000 dimensions."""
        return self.precision == "half" or self.dimensions > MAX_VECTOR_DIMENSIONS

    @property
    def vector_type(self) -> str:
        return "halfvec" if self.half else "vector"

    def adapt(self, vector: np.ndarray) -> Any:
        """``vector`` as the embedding column takes it: a pgvector ``HalfVector`` or ``Vector``."""
        from pgvector import HalfVector, Vector

        return HalfVector(vector) if self.half else Vector(vector)

    @property
    def ops(self) -> str:
        return f"{self.vector_type}_{_OPS[self.metric]}_ops"

    def table(self, name: str) -> sa.Table:
        """The table of collection ``name`` (a description; ``ensure`` creates it)."""
        table_name = self.table_prefix + name
        if len(table_name) > MAX_TABLE_NAME:
            raise ConfigError(
                f"collection name {name!r} has {len(name)} characters; with vectors.table_prefix "
                f"{self.table_prefix!r} pgvector takes at most {MAX_TABLE_NAME - len(self.table_prefix)} "
                "(PostgreSQL names its indexes in 63 bytes): use a shorter name"
            )
        if table_name in self._metadata.tables:
            return self._metadata.tables[table_name]
        column_type = HALFVEC(self.dimensions) if self.half else VECTOR(self.dimensions)
        return sa.Table(
            table_name,
            self._metadata,
            sa.Column("id", sa.Text, primary_key=True),
            sa.Column("record_id", sa.Text, index=True),
            sa.Column("chunk", sa.Integer),
            sa.Column("embedding", column_type, nullable=False),
            sa.Column("text", sa.Text, nullable=False, server_default=""),
            sa.Column("metadata", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
            sa.Column("model", sa.Text, nullable=False, server_default=""),
            sa.Column("updated_at", TIMESTAMP(timezone=True), nullable=False, server_default=sa.func.now()),
            sa.Column("keywords", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
            sa.Column("keyword_length", sa.Integer, nullable=False, server_default="0"),
            sa.Column("kwdoc", sa.BigInteger, sa.Identity(always=False), nullable=False),
            sa.Column("text_hash", BYTEA, nullable=False),
            sa.Index(f"{table_name}_kwdoc_idx", "kwdoc", unique=True),
            # the vectors of a model stored for chunk texts, by their hash (vectors_by_hash: reuse)
            sa.Index(f"{table_name}_text_hash_idx", "model", "text_hash"),
            # fastupdate off: a pending list would be scanned whole by every filtered search until vacuumed
            sa.Index(
                f"{table_name}_metadata_idx",
                "metadata",
                postgresql_using="gin",
                postgresql_ops={"metadata": "jsonb_path_ops"},
                postgresql_with={"fastupdate": "off"},
            ),
            sa.Index(
                f"{table_name}_embedding_idx",
                "embedding",
                postgresql_using="hnsw",
                postgresql_with={"m": self.hnsw_m, "ef_construction": self.hnsw_ef_construction},
                postgresql_ops={"embedding": self.ops},
            ),
            sa.Index(
                f"{table_name}_keywords_idx", "keywords", postgresql_using="gin", postgresql_with={"fastupdate": "off"}
            ),
        )

    def ensure(self, conn: sa.Connection, name: str, declared: Declared | None) -> tuple[sa.Table, Rules]:
        """Create the table of ``name`` at the current schema version if missing, with the rules ``declared``
        states, else upgrade it (``upgrades.py``) and settle its rules (``store.vectors.rules.settle``); its
        keyword terms are made by the rules' analyzer. Returns the table and its rules.
        Raises ConfigError (another size, precision or metric; declared rules it does not hold), SchemaTooNew.
        Nothing stored is changed by a refusal."""
        table = self.table(name)
        advisory_lock(conn, table.name)
        found = embedding_type(conn, table.name)
        if found is None:
            rules = settle(name, None, declared)
            table.create(conn)
            stats_table(table).create(conn)
            for part in posting_tables(table):
                part.create(conn)
            mark_analyzer(conn, table.name, terms_by(rules))
            record_version(conn, table.name)
            record_rules(conn, table.name, rules)
            return table, rules
        if found != self.column_type:
            self._refuse(found, table.name, name)
        self._check_metric(conn, table.name, name)
        stored = recorded_rules(conn, table.name, name)
        rules = settle(name, stored, declared, shown=shown_rules(conn, table.name) if stored is None else None)
        upgrade(conn, table, terms_by(rules))
        if stored is None and declared is not None:
            record_rules(conn, table.name, rules)
        return table, rules

    def set_rules(self, conn: sa.Connection, name: str, rules: Rules) -> int:
        """Record ``rules`` with ``name``'s table and make its keyword terms theirs; the rows analyzed anew."""
        table = self.table(name)
        advisory_lock(conn, table.name)
        before = analyzed_by(conn, table.name)
        upgrade(conn, table, terms_by(rules))
        record_rules(conn, table.name, rules)
        if not rules.keywords or analyzed_by(conn, table.name) == before:
            return 0
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())

    @property
    def column_type(self) -> str:
        """The embedding column's type as PostgreSQL prints it: ``vector(384)``, ``halfvec(384)``."""
        return f"{self.vector_type}({self.dimensions})"

    def _refuse(self, found: str, table_name: str, name: str) -> None:
        """A table whose column is another type: of another size, or of the same size at the other precision."""
        match = _TYPE.fullmatch(found)
        if match is None or int(match["dimensions"]) != self.dimensions or self.dimensions > MAX_VECTOR_DIMENSIONS:
            raise ConfigError(
                f"table {table_name!r} of collection {name!r} holds embeddings of type {found}; "
                f"settings say {self.column_type} (vectors.dimensions): {_FIX}"
            )
        made_with = "half" if match["kind"] == "halfvec" else "float"
        raise ConfigError(
            f"table {table_name!r} of collection {name!r} holds embeddings of type {found}; settings say "
            f'{self.column_type} (vectors.precision = "{self.precision}"): set vectors.precision = "{made_with}" '
            f"to use the table as it is, or {_FIX} and reindex"
        )

    def _check_metric(self, conn: sa.Connection, table_name: str, name: str) -> None:
        """An HNSW index built for another metric would never be used: refuse, naming both."""
        query = sa.text("SELECT indexdef FROM pg_indexes WHERE tablename = :t AND indexname = :i")
        definition = conn.execute(query, {"t": table_name, "i": f"{table_name}_embedding_idx"}).scalar_one_or_none()
        if definition is not None and self.ops not in definition:
            found = next((m for m, ops in _OPS.items() if f"_{ops}_ops" in definition), "another metric")
            raise ConfigError(
                f"collection {name!r} is indexed for {found}; settings say {self.metric} (vectors.metric): {_FIX}"
            )

    def names(self, conn: sa.Connection) -> list[str]:
        """Names of the collections whose tables exist in this database."""
        query = sa.text(
            "SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND column_name = 'embedding' AND starts_with(table_name, :prefix)"
        )
        found = conn.execute(query, {"prefix": self.table_prefix}).scalars().all()
        return [n[len(self.table_prefix) :] for n in found]


def bulk_indexes(table: sa.Table) -> list[sa.Index]:
    """The indexes a bulk load into an empty table drops and builds after the rows: HNSW, the GINs and the text
    hashes' btree (a first load's batches read no hash of their own collection)."""
    built_after = ("_embedding_idx", "_metadata_idx", "_keywords_idx", "_text_hash_idx")
    return [i for i in table.indexes if i.name and i.name.endswith(built_after)]


def embedding_type(conn: sa.Connection, table_name: str) -> str | None:
    """The type of a table's embedding column ("vector(384)"), or None when the table does not exist."""
    query = sa.text(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = to_regclass(:t) AND attname = 'embedding' AND NOT attisdropped"
    )
    return conn.execute(query, {"t": table_name}).scalar_one_or_none()


def field_index_name(table_name: str, field: str) -> str:
    """The name of ``field``'s btree index: short enough for any table name pgvector allows."""
    return f"{table_name}_by_{hashlib.sha256(field.encode()).hexdigest()[:8]}"


def ensure_field_indexes(conn: sa.Connection, table_name: str, fields: Iterable[str]) -> list[str]:
    """Create the btree indexes of ``fields`` that are missing; return the names created.

    Existing indexes are read first, so a schema that is up to date takes no lock.
    """
    wanted = {field_index_name(table_name, f): f for f in fields}
    query = sa.text("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = :t")
    present = set(conn.execute(query, {"t": table_name}).scalars())
    missing = {name: f for name, f in wanted.items() if name not in present}
    if not missing:
        return []
    advisory_lock(conn, table_name)
    raw = driver(conn)
    for name, f in missing.items():
        # The expression is the query's own (pgvector.filters.field_expression): metadata -> 'a' -> 'b'.
        expression = sql.SQL(" -> ").join([sql.Identifier("metadata"), *(sql.Literal(p) for p in f.split("."))])
        raw.execute(
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (({}))").format(
                sql.Identifier(name), sql.Identifier(table_name), expression
            )
        )
    return sorted(missing)
