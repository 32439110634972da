"""The pgvector store: collections as tables in one PostgreSQL database with the vector extension."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import sqlalchemy as sa
from pgvector.psycopg import register_vector
from psycopg import sql

import store.vectors.pgvector.segments as segments
from store.connect.postgres import advisory_lock, driver, make_engine, safe_url, transaction
from store.settings import NetworkSettings, Settings, VectorSettings, default
from store.settings.section import FromSection
from store.vectors.base import DEFAULT_METRIC, Collection, Metric, QueryEmbedder, VectorStore
from store.vectors.pgvector.keywords import stats_table
from store.vectors.pgvector.schema import Schema
from store.vectors.pgvector.table import PgvectorCollection
from store.vectors.pgvector.upgrades import recorded_rules
from store.vectors.rules import Declared, Rules

__all__ = ["MAX_SCAN_TUPLES", "PgvectorStore", "PgvectorTuning"]

#: Rows a filtered iterative scan may visit before it gives up (pgvector's hnsw.max_scan_tuples).
MAX_SCAN_TUPLES = 100_000


@dataclass(frozen=True)
class PgvectorTuning(FromSection):
    """How a pgvector store builds and searches its tables: the ``[vectors]`` settings of the same names, and
    the size of its connection pool."""

    hnsw_m: int = default(VectorSettings, "hnsw_m")
    hnsw_ef_construction: int = default(VectorSettings, "hnsw_ef_construction")
    ef_search: int = default(VectorSettings, "ef_search")
    table_prefix: str = default(VectorSettings, "table_prefix")
    exact_search_rows: int = default(VectorSettings, "exact_search_rows")
    index_build_workers: int = default(VectorSettings, "index_build_workers")
    precision: Literal["float", "half"] = default(VectorSettings, "precision")
    pool_size: int = 5  # not a setting: the store's own pool


class PgvectorStore(VectorStore):
    """Collections as tables in one PostgreSQL database with the vector extension."""

    def __init__(
        self,
        url: str,
        *,
        dimensions: int,
        metric: Metric = DEFAULT_METRIC,
        tuning: PgvectorTuning = PgvectorTuning(),
        embedder: QueryEmbedder | None = None,
        network: NetworkSettings | None = None,
    ) -> None:
        super().__init__(dimensions=dimensions, metric=metric, embedder=embedder)
        self.schema = Schema(
            dimensions=dimensions,
            metric=metric,
            hnsw_m=tuning.hnsw_m,
            hnsw_ef_construction=tuning.hnsw_ef_construction,
            table_prefix=tuning.table_prefix,
            precision=tuning.precision,
        )
        self.url = url
        self.safe_url = safe_url(url)
        self.ef_search = tuning.ef_search
        #: A filter matching at most this many rows is searched exactly (see ``planner``).
        self.exact_search_rows = tuning.exact_search_rows
        #: PostgreSQL's parallel workers for an HNSW build (max_parallel_maintenance_workers).
        self.index_build_workers = tuning.index_build_workers
        self.engine = make_engine(
            url, setting="vectors.url", network=network, pool_size=tuning.pool_size, pool_pre_ping=True
        )
        self._create_extension()
        sa.event.listen(self.engine, "connect", lambda dbapi, _record: register_vector(dbapi))

    @classmethod
    def from_settings(cls, settings: Settings, *, embedder: QueryEmbedder | None = None) -> PgvectorStore:
        v = settings.vectors
        assert v.url is not None
        return cls(
            v.url,
            dimensions=v.dimensions,
            metric=v.metric,
            tuning=PgvectorTuning.from_settings(v),
            embedder=embedder,
            network=settings.network,
        )

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def transaction(self) -> Iterator[sa.Connection]:
        """A connection in a transaction; driver errors become StoreUnavailable or StoreError."""
        with transaction(self.engine, f"PostgreSQL at {self.safe_url}") as conn:
            yield conn

    def tune_search(self, conn: sa.Connection, *, filtered: bool = False) -> None:
        """Per-transaction HNSW settings: accuracy, and iterative scans for filtered search.

        A filtered search that reaches the HNSW path matches many rows (the planner sorted fewer exactly),
        so the index walk is the fast way: bitmap and sequential scans are turned off for it, else PostgreSQL
        may sort tens of thousands of rows instead.
        """
        settings = {
            "hnsw.ef_search": str(self.ef_search),
            "hnsw.iterative_scan": "strict_order",
            "hnsw.max_scan_tuples": str(MAX_SCAN_TUPLES),
        }
        if filtered:
            settings |= {"enable_bitmapscan": "off", "enable_seqscan": "off"}
        conn.execute(sa.select(*(sa.func.set_config(name, value, sa.true()) for name, value in settings.items())))

    def _create_extension(self) -> None:
        with self.transaction() as conn:
            advisory_lock(conn, "vectorsync:extension")
            conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
        self.engine.dispose()  # connections made before the extension existed cannot adapt vectors

    # -- hooks -----------------------------------------------------------------------

    def _ensure(self, name: str, declared: Declared | None) -> Collection:
        with self.transaction() as conn:
            table, rules = self.schema.ensure(conn, name, declared)
        collection = PgvectorCollection(self, name, table)
        collection.rules = rules
        return collection

    def _stored_rules(self, name: str) -> Rules | None:
        with self.transaction() as conn:
            return recorded_rules(conn, self.schema.table(name).name, name)

    def _set_rules(self, name: str, rules: Rules) -> int:
        with self.transaction() as conn:
            return self.schema.set_rules(conn, name, rules)

    def _drop(self, name: str) -> None:
        table = self.schema.table(name)
        with self.transaction() as conn:
            table.drop(conn, checkfirst=True)
            stats_table(table).drop(conn, checkfirst=True)
            segments.drop(conn, table)

    def _reset(self, name: str) -> None:
        """TRUNCATE: the rows go at once whatever their number, the table and its indexes stay (empty); ANALYZE
        so the search planner reads an empty table rather than an unknown one."""
        table = self.schema.table(name).name
        with self.transaction() as conn:
            advisory_lock(conn, table)
            raw = driver(conn)
            raw.execute(
                sql.SQL("TRUNCATE {}, {}").format(
                    sql.Identifier(table), sql.Identifier(stats_table(self.schema.table(name)).name)
                )
            )
            segments.clear(raw, self.schema.table(name))
            raw.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))

    def _list(self) -> list[str]:
        with self.transaction() as conn:
            return self.schema.names(conn)
