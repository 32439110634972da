"""The pgvector backend: a PostgreSQL table per collection, HNSW search, COPY writes.

Table ``<prefix><name>``: ``id`` (primary key), ``record_id`` (btree),
``chunk``, ``embedding`` (``vector(d)``, ``halfvec(d)`` above 2000
dimensions, HNSW for the metric), ``text``, ``metadata`` (jsonb, GIN),
``model``, ``updated_at``. Filtered searches use pgvector's iterative index
scans, so a selective filter still fills ``limit``. Every write is one
transaction: ``replace_where`` readers see the old set or the new set.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
import sqlalchemy as sa
from pgvector.psycopg import register_vector
from pgvector.sqlalchemy import HALFVEC, VECTOR
from psycopg import sql
from sqlalchemy.dialects.postgresql import JSONB, JSONPATH, TIMESTAMP
from sqlalchemy.dialects.postgresql import insert as pg_insert

from store.collection import Collection, Metric, QueryEmbedder, VectorStore
from store.errors import ConfigError
from store.filters import And, AnyOf, Compare, Eq, Filter, Not, Or
from store.records import VectorMatch, VectorRecord, canonical_json
from store.settings import Settings
from store.sql import make_engine, safe_url, transaction

__all__ = ["PgvectorCollection", "PgvectorStore", "compile_filter"]

#: Above this many dimensions the column is halfvec: HNSW indexes vector only up to 2000.
MAX_VECTOR_DIMENSIONS = 2000
#: halfvec's HNSW limit.
MAX_HALFVEC_DIMENSIONS = 4000
#: A load this large into an empty table builds the HNSW index after the rows (much faster).
BULK_LOAD_ROWS = 2000
#: Rows a filtered iterative scan may visit before it gives up (pgvector's hnsw.max_scan_tuples).
MAX_SCAN_TUPLES = 100_000

_OPS = {"cosine": "cosine", "dot": "ip", "euclidean": "l2"}
_COLUMNS = ("id", "record_id", "chunk", "embedding", "text", "metadata", "model")
_COPY_TYPES = ["text", "text", "int4", None, "text", "jsonb", "text"]
_COMPARE = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


# -- filters ---------------------------------------------------------------------------


def _json_path(field: str) -> str:
    # Field names are checked (letters, digits, _) before they get here; quoting keeps
    # names such as "last" or "size" from being read as jsonpath keywords.
    return "$" + "".join(f'."{part}"' for part in field.split("."))


def _path_match(column: Any, field: str, condition: str, values: dict[str, Any]) -> sa.ColumnElement[bool]:
    # Values travel as jsonpath variables in a bound jsonb parameter, never in the text.
    # lax mode unwraps a list, so a list-valued field matches when one element does.
    path = f"exists({_json_path(field)} ? ({condition}))"
    return sa.func.jsonb_path_match(
        column,
        sa.cast(sa.literal(path), JSONPATH),
        sa.cast(sa.literal(json.dumps(values)), JSONB),
        sa.true(),
        type_=sa.Boolean,
    )


def compile_filter(filter: Filter, table: sa.Table) -> sa.ColumnElement[bool]:
    """Translate a Filter into a SQL condition with every value bound as a parameter."""
    metadata = table.c.metadata
    match filter:
        case Eq(field="record_id", value=str(value)):
            return table.c.record_id == value
        case AnyOf(field="record_id", values=values) if all(isinstance(v, str) for v in values):
            return table.c.record_id.in_(values)
        case Eq(field=field, value=value):
            return _path_match(metadata, field, "@ == $v", {"v": value})
        case AnyOf(field=field, values=values):
            condition = " || ".join(f"@ == $v{i}" for i in range(len(values)))
            return _path_match(metadata, field, condition, {f"v{i}": v for i, v in enumerate(values)})
        case Compare(field=field, op=op, value=value):
            return _path_match(metadata, field, f"@ {_COMPARE[op]} $v", {"v": value})
        case Not(operand=operand):
            # A NULL (record_id absent) must count as "no match" before it is negated.
            return sa.not_(sa.func.coalesce(compile_filter(operand, table), sa.false()))
        case And(parts=parts):
            return sa.and_(*(compile_filter(part, table) for part in parts))
        case Or(parts=parts):
            return sa.or_(*(compile_filter(part, table) for part in parts))
    raise ConfigError(f"unsupported filter {filter!r}")


# -- collection ------------------------------------------------------------------------


class PgvectorCollection(Collection):
    """One collection, one table."""

    def __init__(self, store: PgvectorStore, name: str, table: sa.Table) -> None:
        super().__init__(name, dimensions=store.dimensions, metric=store.metric, embedder=store.embedder)
        self._store = store
        self.table = table

    def _where(self, filter: Filter | None) -> sa.ColumnElement[bool]:
        return sa.true() if filter is None else compile_filter(filter, self.table)

    def _upsert(self, records: list[VectorRecord]) -> None:
        with self._store.transaction() as conn:
            self._write(conn, records)

    def _delete_ids(self, ids: list[str]) -> None:
        with self._store.transaction() as conn:
            conn.execute(sa.delete(self.table).where(self.table.c.id.in_(ids)))

    def _delete_where(self, filter: Filter) -> None:
        with self._store.transaction() as conn:
            conn.execute(sa.delete(self.table).where(self._where(filter)))

    def _replace_where(self, filter: Filter, records: list[VectorRecord]) -> None:
        with self._store.transaction() as conn:
            # Two swaps of the same set wait for each other; otherwise the second one's
            # delete could miss rows the first one is inserting.
            key = f"{self.table.name}:{canonical_json(filter.to_dict())}"
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(sa.func.hashtextextended(key, 0))))
            conn.execute(sa.delete(self.table).where(self._where(filter)))
            self._write(conn, records, bulk=False)  # a table lock after the DELETE could deadlock

    def _search(self, vector: list[float], filter: Filter | None, limit: int) -> list[VectorMatch]:
        distance, score = self._distance(vector)
        query = (
            sa.select(self.table.c.id, self.table.c.text, self.table.c.metadata, score.label("score"))
            .where(self._where(filter))
            .order_by(distance)
            .limit(limit)
        )
        with self._store.transaction() as conn:
            self._store.tune_search(conn)
            rows = conn.execute(query).all()
        return [VectorMatch(id=r.id, score=float(r.score), text=r.text, metadata=r.metadata) for r in rows]

    def _distance(self, vector: list[float]) -> tuple[Any, Any]:
        column = self.table.c.embedding
        if self.metric == "cosine":
            distance = column.cosine_distance(vector)
            return distance, 1 - distance
        if self.metric == "dot":
            distance = column.max_inner_product(vector)
            return distance, -distance
        distance = column.l2_distance(vector)
        return distance, 1 / (1 + distance)

    def _count(self, filter: Filter | None) -> int:
        query = sa.select(sa.func.count()).select_from(self.table).where(self._where(filter))
        with self._store.transaction() as conn:
            return int(conn.execute(query).scalar_one())

    def defer_index(self) -> bool:
        with self._store.transaction() as conn:
            self._store.lock_table(conn, self.table.name)
            if conn.execute(sa.select(sa.exists().select_from(self.table))).scalar_one():
                return False
            self._store.embedding_index(self.table).drop(conn, checkfirst=True)
        return True

    def ensure_index(self) -> None:
        with self._store.transaction() as conn:
            self._store.lock_table(conn, self.table.name)
            conn.execute(sa.select(sa.func.set_config("maintenance_work_mem", "512MB", sa.true())))
            self._store.embedding_index(self.table).create(conn, checkfirst=True)

    # -- COPY ------------------------------------------------------------------------

    def _write(self, conn: sa.Connection, records: list[VectorRecord], *, bulk: bool = True) -> None:
        if not records:
            return
        if bulk and len(records) >= BULK_LOAD_ROWS and self._empty_for_bulk(conn):
            self._store.load_then_index(conn, self, records)
            return
        staging = f"vs_staging_{self.table.name}"
        raw = _driver(conn)
        raw.execute(
            sql.SQL("CREATE TEMP TABLE IF NOT EXISTS {} (LIKE {} INCLUDING DEFAULTS) ON COMMIT DROP").format(
                sql.Identifier(staging), sql.Identifier(self.table.name)
            )
        )
        self.copy_rows(raw, staging, records)
        load = sa.table(staging, *(sa.column(c) for c in _COLUMNS))
        insert = pg_insert(self.table).from_select(list(_COLUMNS), sa.select(*load.c))
        update = {c: insert.excluded[c] for c in _COLUMNS if c != "id"} | {"updated_at": sa.func.now()}
        conn.execute(insert.on_conflict_do_update(index_elements=["id"], set_=update))
        raw.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(staging)))

    def _empty_for_bulk(self, conn: sa.Connection) -> bool:
        lock = sql.SQL("LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE").format(sql.Identifier(self.table.name))
        _driver(conn).execute(lock)
        return conn.execute(sa.select(sa.exists().select_from(self.table))).scalar_one() is False

    def copy_rows(self, raw: psycopg.Connection[Any], table: str, records: Sequence[VectorRecord]) -> None:
        """Binary COPY of ``records`` into ``table`` (~50k rows/s, versus hundreds row by row)."""
        columns = sql.SQL(", ").join(sql.Identifier(c) for c in _COLUMNS)
        statement = sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT BINARY)").format(sql.Identifier(table), columns)
        types = [t or self._store.vector_type for t in _COPY_TYPES]
        with raw.cursor() as cursor, cursor.copy(statement) as copy:
            copy.set_types(types)
            for r in records:
                record_id, chunk = r.metadata.get("record_id"), r.metadata.get("chunk")
                vector = np.asarray(r.embedding, dtype=np.float32)
                copy.write_row((r.id, record_id, chunk, self._store.adapt(vector), r.text,
                                psycopg.types.json.Jsonb(r.metadata), r.model))


def _driver(conn: sa.Connection) -> psycopg.Connection[Any]:
    return conn.connection.driver_connection  # type: ignore[return-value]


# -- store -----------------------------------------------------------------------------


class PgvectorStore(VectorStore):
    """Collections as tables in one PostgreSQL database with the vector extension."""

    def __init__(
        self,
        url: str,
        *,
        dimensions: int,
        metric: Metric = "cosine",
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 64,
        ef_search: int = 100,
        table_prefix: str = "vs_",
        embedder: QueryEmbedder | None = None,
        pool_size: int = 5,
    ) -> None:
        super().__init__(dimensions=dimensions, metric=metric, embedder=embedder)
        if dimensions > MAX_HALFVEC_DIMENSIONS:
            raise ConfigError(
                f"vectors.dimensions = {dimensions} is more than pgvector can index "
                f"({MAX_HALFVEC_DIMENSIONS} as halfvec): use a model with fewer dimensions"
            )
        self.url = url
        self.safe_url = safe_url(url)
        self.hnsw_m, self.hnsw_ef_construction, self.ef_search = hnsw_m, hnsw_ef_construction, ef_search
        self.table_prefix = table_prefix
        self.half = dimensions > MAX_VECTOR_DIMENSIONS
        self.vector_type = "halfvec" if self.half else "vector"
        self.engine = make_engine(url, setting="vectors.url", pool_size=pool_size, pool_pre_ping=True)
        self._metadata = sa.MetaData()
        self._create_extension()
        sa.event.listen(self.engine, "connect", lambda dbapi, _record: register_vector(dbapi))

    @classmethod
    def from_settings(cls, settings: Settings, *, embedder: QueryEmbedder | None = None) -> PgvectorStore:
        v = settings.vectors
        assert v.url is not None
        return cls(
            v.url, dimensions=v.dimensions, metric=v.metric, hnsw_m=v.hnsw_m,
            hnsw_ef_construction=v.hnsw_ef_construction, ef_search=v.ef_search,
            table_prefix=v.table_prefix, embedder=embedder,
        )

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def transaction(self) -> Iterator[sa.Connection]:
        """A connection in a transaction; driver errors become StoreUnavailable or StoreError."""
        with transaction(self.engine, f"PostgreSQL at {self.safe_url}") as conn:
            yield conn

    def adapt(self, vector: np.ndarray) -> Any:
        from pgvector import HalfVector, Vector

        return HalfVector(vector) if self.half else Vector(vector)

    def tune_search(self, conn: sa.Connection) -> None:
        """Per-transaction HNSW settings: accuracy, and iterative scans for filtered search."""
        settings = {
            "hnsw.ef_search": str(self.ef_search),
            "hnsw.iterative_scan": "strict_order",
            "hnsw.max_scan_tuples": str(MAX_SCAN_TUPLES),
        }
        for name, value in settings.items():
            conn.execute(sa.select(sa.func.set_config(name, value, sa.true())))

    # -- schema ------------------------------------------------------------------------

    def _create_extension(self) -> None:
        with self.transaction() as conn:
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(sa.func.hashtextextended("vectorsync:extension", 0))))
            conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
        self.engine.dispose()  # connections made before the extension existed cannot adapt vectors

    def _table(self, name: str) -> sa.Table:
        table_name = self.table_prefix + name
        if table_name in self._metadata.tables:
            return self._metadata.tables[table_name]
        column_type = HALFVEC(self.dimensions) if self.half else VECTOR(self.dimensions)
        ops = f"{self.vector_type}_{_OPS[self.metric]}_ops"
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
            sa.Index(f"{table_name}_metadata_idx", "metadata", postgresql_using="gin",
                     postgresql_ops={"metadata": "jsonb_path_ops"}),
            self._hnsw_index(table_name, ops),
        )

    def _hnsw_index(self, table_name: str, ops: str) -> sa.Index:
        return sa.Index(
            f"{table_name}_embedding_idx", "embedding", postgresql_using="hnsw",
            postgresql_with={"m": self.hnsw_m, "ef_construction": self.hnsw_ef_construction},
            postgresql_ops={"embedding": ops},
        )

    def _ensure(self, name: str) -> Collection:
        table = self._table(name)
        with self.transaction() as conn:
            self.lock_table(conn, table.name)
            found = self._existing_type(conn, table.name)
            if found is None:
                table.create(conn)
            elif found != f"{self.vector_type}({self.dimensions})":
                raise ConfigError(
                    f"table {table.name!r} of collection {name!r} holds embeddings of type {found}; "
                    f"settings say {self.vector_type}({self.dimensions}) (vectors.dimensions): "
                    "drop the table or use another collection name"
                )
            else:
                self._check_metric(conn, table.name, name)
        return PgvectorCollection(self, name, table)

    def _check_metric(self, conn: sa.Connection, table_name: str, name: str) -> None:
        """An HNSW index built for another metric would never be used: refuse, naming both."""
        query = sa.text("SELECT indexdef FROM pg_indexes WHERE tablename = :t AND indexname = :i")
        definition = conn.execute(query, {"t": table_name, "i": f"{table_name}_embedding_idx"}).scalar_one_or_none()
        wanted = f"{self.vector_type}_{_OPS[self.metric]}_ops"
        if definition is not None and wanted not in definition:
            found = next((m for m, ops in _OPS.items() if f"_{ops}_ops" in definition), "another metric")
            raise ConfigError(
                f"collection {name!r} is indexed for {found}; settings say {self.metric} (vectors.metric): "
                "drop the table or use another collection name"
            )

    @staticmethod
    def _existing_type(conn: sa.Connection, table_name: str) -> str | None:
        query = sa.text(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = to_regclass(:t) AND attname = 'embedding' AND NOT attisdropped"
        )
        return conn.execute(query, {"t": table_name}).scalar_one_or_none()

    def _drop(self, name: str) -> None:
        table = self._table(name)
        with self.transaction() as conn:
            table.drop(conn, checkfirst=True)

    def _list(self) -> list[str]:
        query = sa.text(
            "SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND column_name = 'embedding' AND starts_with(table_name, :prefix)"
        )
        with self.transaction() as conn:
            names = conn.execute(query, {"prefix": self.table_prefix}).scalars().all()
        return [n[len(self.table_prefix):] for n in names]

    @staticmethod
    def embedding_index(table: sa.Table) -> sa.Index:
        return next(i for i in table.indexes if i.name and i.name.endswith("_embedding_idx"))

    @staticmethod
    def lock_table(conn: sa.Connection, table_name: str) -> None:
        """Serialize schema changes of one table across processes (advisory, until commit)."""
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(sa.func.hashtextextended(table_name, 0))))

    def load_then_index(self, conn: sa.Connection, collection: PgvectorCollection, records: list[VectorRecord]) -> None:
        """Bulk load into an empty table: drop HNSW, COPY, rebuild (an index build beats inserts)."""
        index = self.embedding_index(collection.table)
        index.drop(conn, checkfirst=True)
        collection.copy_rows(_driver(conn), collection.table.name, records)
        conn.execute(sa.select(sa.func.set_config("maintenance_work_mem", "512MB", sa.true())))
        index.create(conn)
