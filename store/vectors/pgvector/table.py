"""A pgvector collection: one table, HNSW search with iterative scans, binary COPY writes.

Every write is one transaction, so ``replace_where`` readers see the old set
or the new set. A load of ``BULK_LOAD_ROWS`` or more into an empty table
builds the HNSW index after the rows, which is far faster than inserting into it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import psycopg
import sqlalchemy as sa
from psycopg import sql
from sqlalchemy.dialects.postgresql import ARRAY, BYTEA, JSONB

import store.vectors.pgvector.segments as segments
from store.connect.postgres import advisory_lock, driver
from store.errors import StoreError
from store.vectors.base import Collection, Metric, QueryEmbedder
from store.vectors.filters import Filter
from store.vectors.indexed import IndexedFields
from store.vectors.pgvector.building import IndexBuild, build_lock_key, build_memory_mb, prepare_build, read_progress
from store.vectors.pgvector.filters import compile_filter
from store.vectors.pgvector.keywords import Delta, count_rows, drifted_terms, ranked
from store.vectors.pgvector.planner import OVERSHOOT, Plan, Ranking, exact_search, observe, plan
from store.vectors.pgvector.purging import purge
from store.vectors.pgvector.schema import Schema, bulk_indexes, ensure_field_indexes
from store.vectors.pgvector.scoring import best
from store.vectors.pgvector.writing import COLUMNS, copy_rows, insert_replacing, lock_ids
from store.vectors.records import ChunkDigest, StoredChunk, VectorMatch, VectorRecord

__all__ = ["BULK_LOAD_ROWS", "PgvectorCollection", "PgvectorParts"]

_log = logging.getLogger(__name__)

#: A load this large into an empty table builds the HNSW index after the rows (much faster).
BULK_LOAD_ROWS = 2000


class PgvectorParts(Protocol):
    """What a collection uses of its store (``PgvectorStore`` is one): a Protocol here, so that the store, which
    makes collections, is the only one of the two that imports the other."""

    dimensions: int
    metric: Metric
    embedder: QueryEmbedder | None
    engine: sa.Engine
    schema: Schema
    exact_search_rows: int
    index_build_workers: int

    def transaction(self) -> AbstractContextManager[sa.Connection]: ...

    def tune_search(self, conn: sa.Connection, *, filtered: bool = False) -> None: ...


class PgvectorCollection(Collection):
    """One collection, one table."""

    def __init__(self, store: PgvectorParts, name: str, table: sa.Table) -> None:
        super().__init__(name, dimensions=store.dimensions, metric=store.metric, embedder=store.embedder)
        self._store = store
        self.table = table
        self.parallel_legs = True  # each leg is one query on a pooled connection: hybrid waits for the slower

    @property
    def place(self) -> str:
        return f"table {self.table.name}"

    def _delta(self, conn: sa.Connection) -> Delta:
        """The statistics changes of a write; nothing counted when the collection keeps no keyword index."""
        return Delta(conn, self.table, counting=self.keyword_analyzer is not None, purge=purge)

    def _where(self, filter: Filter | None) -> sa.ColumnElement[bool]:
        return sa.true() if filter is None else compile_filter(filter, self.table, self.indexed)

    def _upsert(self, records: list[VectorRecord]) -> None:
        with self._store.transaction() as conn:
            lock_ids(conn, self.table.name, [r.id for r in records])
            delta = self._delta(conn)
            self._write(conn, records, delta)
            delta.apply()
        self._merge_segments()

    def _delete_ids(self, ids: list[str]) -> None:
        with self._store.transaction() as conn:
            lock_ids(conn, self.table.name, ids)
            delta = self._delta(conn)
            delta.delete(sa.delete(self.table).where(self.table.c.id.in_(ids)))
            delta.apply()

    def _delete_where(self, filter: Filter) -> None:
        with self._store.transaction() as conn:
            delta = self._delta(conn)
            delta.delete(sa.delete(self.table).where(self._where(filter)))
            delta.apply()

    def _replace_where(self, filter: Filter, records: list[VectorRecord]) -> None:
        with self._store.transaction() as conn:
            lock_ids(conn, self.table.name, [r.id for r in records], swap=filter)
            delta = self._delta(conn)
            delta.delete(sa.delete(self.table).where(self._where(filter)))
            self._write(conn, records, delta, bulk=False)  # a table lock after the DELETE could deadlock
            delta.apply()
        self._merge_segments()

    def _merge_segments(self) -> None:
        """Merge the keyword segments that have filled a size class (``segments.merge``), after the write has
        committed: the write stands whatever this meets, and the next write merges what this could not."""
        try:
            with self._store.transaction() as conn:
                if self.keyword_analyzer is None or self._deferred(conn):
                    return  # a first load: ensure_index merges every segment once, at its end
                segments.merge(driver(conn), self.table)
        except StoreError as exc:
            _log.warning("keyword segments of %s not merged now (%s); the next write merges them", self.name, exc)

    def _replace_records(self, record_ids: list[str], records: list[VectorRecord]) -> None:
        """The pipeline's swap: the DELETE, then the rows copied straight into the
        table, then COMMIT. No staging table, no ON CONFLICT and no swap lock are needed: the caller holds the
        records' locks (no other swap of them runs), the DELETE has removed every row of these records, and a
        chunk's id names its record (``42:0``), so no row of another record can share an id. A row that does
        (written by hand under such an id) fails the COPY; the swap is then done again as ``replace_where``."""
        try:
            with self._store.transaction() as conn:
                ids = [r.id for r in records]
                lock_ids(conn, self.table.name, ids)
                delta = self._delta(conn)  # the keyword statistics: the rows deleted out, the rows copied in
                delta.delete(sa.delete(self.table).where(self.table.c.record_id.in_(record_ids)))
                if records:
                    self.copy_rows(driver(conn), self.table.name, records)
                    # by id, not by record: a row of these records another writer committed since the DELETE
                    # began is that writer's to count
                    t, copied = self.table.c, sa.bindparam("copied", ids, type_=ARRAY(sa.Text))
                    delta.add(sa.select(t.keywords, t.keyword_length).where(t.id == sa.func.any(copied)), 1)
                delta.apply()
        except StoreError as exc:
            if not isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise
            self._replace_where(Filter.any_of("record_id", record_ids), records)
            return
        self._merge_segments()

    def _search(self, vector: list[float], filter: Filter | None, limit: int) -> list[VectorMatch]:
        distance = self._distance(vector)
        exact_rows = self._store.exact_search_rows
        with self._store.transaction() as conn:
            rows = None
            if filter is not None and exact_rows > 0:
                where = self._where(filter)
                chosen = plan(conn, self.table, where, exact_rows=exact_rows)
                if chosen.path == "exact":
                    rows = exact_search(
                        conn,
                        self.table,
                        where=where,
                        ranking=Ranking(distance, self._score),
                        limit=limit,
                        exact_rows=exact_rows,
                    )
                    if rows is None:
                        chosen = Plan("hnsw", OVERSHOOT * exact_rows + 1, "overshoot")
                observe(self.name, chosen, exact_rows=exact_rows)
            if rows is None:
                self._store.tune_search(conn, filtered=filter is not None)
                rows = list(conn.execute(self._hnsw_query(distance, filter, limit)).all())
        return [VectorMatch(id=r.id, score=float(r.score), text=r.text, metadata=r.metadata) for r in rows]

    def _keyword_search(self, terms: list[str], filter: Filter | None, limit: int) -> list[VectorMatch]:
        """BM25 (``keywords.py``); a selective filter takes the planner's exact path, as the vector leg does."""
        exact_rows = self._store.exact_search_rows
        where = self._where(filter)
        with self._store.transaction() as conn:
            rows = None
            if filter is not None and exact_rows > 0:
                chosen = plan(conn, self.table, where, exact_rows=exact_rows)
                if chosen.path == "exact":
                    rows = ranked(conn, self.table, terms, where=where, limit=limit, cap=OVERSHOOT * exact_rows)
                    if rows is None:
                        chosen = Plan("hnsw", OVERSHOOT * exact_rows + 1, "overshoot")
                observe(self.name, chosen, exact_rows=exact_rows)
            if rows is None:
                rows = best(conn, self.table, terms, where=where, limit=limit)
            found = rows if rows is not None else ranked(conn, self.table, terms, where=where, limit=limit)
        return [VectorMatch(id=r.id, score=float(r.score), text=r.text, metadata=r.metadata) for r in found or []]

    def _hnsw_query(self, distance: Any, filter: Filter | None, limit: int) -> sa.Select[Any]:
        """Nearest rows through the HNSW index (iterative scans keep going until ``limit`` rows match)."""
        return (
            sa.select(self.table.c.id, self.table.c.text, self.table.c.metadata, self._score(distance).label("score"))
            .where(self._where(filter))
            .order_by(distance)
            .limit(limit)
        )

    def _distance(self, vector: list[float]) -> Any:
        column = self.table.c.embedding
        if self.metric == "cosine":
            return column.cosine_distance(vector)
        if self.metric == "dot":
            return column.max_inner_product(vector)
        return column.l2_distance(vector)

    def _score(self, distance: Any) -> Any:
        """The score of a distance, higher is closer: works on SQL expressions and numbers alike."""
        if self.metric == "cosine":
            return 1 - distance
        if self.metric == "dot":
            return -distance
        return 1 / (1 + distance)

    def _count(self, filter: Filter | None) -> int:
        query = sa.select(sa.func.count()).select_from(self.table).where(self._where(filter))
        with self._store.transaction() as conn:
            return int(conn.execute(query).scalar_one())

    def _holds(self, field: str) -> bool:
        # The path is a bound text[] and the two empties bound jsonb: no user text reaches the SQL.
        path = sa.bindparam("path", field.split("."), type_=ARRAY(sa.Text))
        value = self.table.c.metadata.op("#>", return_type=JSONB)(path)
        empty = [sa.cast(sa.literal(text), JSONB) for text in ("null", "[]")]
        query = sa.select(sa.exists().select_from(self.table).where(value.is_not(None), value.not_in(empty)))
        with self._store.transaction() as conn:
            return bool(conn.execute(query).scalar_one())

    def _chunks_of(self, record_id: str) -> list[StoredChunk]:
        t = self.table
        query = sa.select(t.c.id, t.c.chunk, t.c.text, t.c.model, t.c.updated_at).where(t.c.record_id == record_id)
        with self._store.transaction() as conn:
            return [StoredChunk(r.id, r.chunk or 0, r.text, r.model, r.updated_at) for r in conn.execute(query)]

    def _vectors_by_hash(self, hashes: list[str], model: str) -> list[tuple[str, list[float]]]:
        t = self.table
        query = sa.select(t.c.text_hash, t.c.embedding).where(
            t.c.model == model, t.c.text_hash == sa.func.any(sa.bindparam("hashes", type_=ARRAY(BYTEA)))
        )
        with self._store.transaction() as conn:
            rows = conn.execute(query, {"hashes": [bytes.fromhex(h) for h in hashes]})
            return [(bytes(r.text_hash).hex(), _floats(r.embedding)) for r in rows]

    def _chunk_digests(self, record_ids: list[str]) -> list[ChunkDigest]:
        t = self.table
        # The text hashed as it is stored, not the text_hash column: verify checks the text itself.
        text_hash = sa.func.encode(sa.func.sha256(sa.func.convert_to(t.c.text, "UTF8")), "hex")
        columns = (t.c.id, t.c.record_id, t.c.chunk, text_hash, t.c.model, sa.func.vector_dims(t.c.embedding))
        query = sa.select(*columns).where(t.c.record_id.in_(record_ids))
        with self._store.transaction() as conn:
            return [ChunkDigest(r[0], r[1], r[2] or 0, r[3], r[4], r[5]) for r in conn.execute(query)]

    def _record_ids_page(self, after: str | None, limit: int) -> list[tuple[str, int]]:
        t = self.table
        query = sa.select(t.c.record_id, sa.func.count()).where(t.c.record_id.is_not(None))
        if after is not None:
            query = query.where(t.c.record_id > after)
        query = query.group_by(t.c.record_id).order_by(t.c.record_id).limit(limit)
        with self._store.transaction() as conn:
            return [(str(r[0]), int(r[1])) for r in conn.execute(query)]

    def keyword_drift(self) -> int:
        with self._store.transaction() as conn:
            return drifted_terms(conn, self.table)

    def _index_fields(self, fields: IndexedFields) -> None:
        with self._store.transaction() as conn:
            ensure_field_indexes(conn, self.table.name, fields)

    def is_empty(self) -> bool:
        with self._store.transaction() as conn:
            return not conn.execute(sa.select(sa.exists().select_from(self.table))).scalar_one()

    def defer_index(self) -> bool:
        with self._store.transaction() as conn:
            advisory_lock(conn, self.table.name)
            if conn.execute(sa.select(sa.exists().select_from(self.table))).scalar_one():
                return False
            for index in bulk_indexes(self.table):
                index.drop(conn, checkfirst=True)
        return True

    def ensure_index(self) -> None:
        with self._store.transaction() as conn:
            advisory_lock(conn, build_lock_key(self.table.name))  # a build left running by a task ends first
            advisory_lock(conn, self.table.name)
            self._prepare_build(conn)
            for index in bulk_indexes(self.table):
                index.create(conn, checkfirst=True)
            segments.compact(driver(conn), self.table)
            self._analyze(conn)

    def build_index(self, *, until: float, deadline: float, limit: int) -> bool:
        with self._store.transaction() as conn:
            rows = conn.execute(sa.select(sa.func.count()).select_from(self.table)).scalar_one()
        megabytes = build_memory_mb(rows, dimensions=self.dimensions, m=self._store.schema.hnsw_m)
        settings = {"maintenance_work_mem": f"{megabytes}MB"}
        settings["max_parallel_maintenance_workers"] = str(self._store.index_build_workers)
        build = IndexBuild(self._store.engine, self.table.name, bulk_indexes(self.table), settings=settings)
        if not build.run(until=until, deadline=deadline, limit=limit):
            return False
        self.ensure_index()  # every index there: the keyword segments compacted, the statistics fresh
        return True

    def build_progress(self) -> str | None:
        with self._store.transaction() as conn:
            progress = read_progress(conn, self.table.name)
        return None if progress is None else progress.describe()

    def recount_keywords(self) -> int:
        with self._store.transaction() as conn:
            advisory_lock(conn, f"{self.table.name}:recount")
            driver(conn).execute(sql.SQL("LOCK TABLE {} IN SHARE MODE").format(sql.Identifier(self.table.name)))
            return count_rows(conn, self.table)  # writers wait for the recount, which sees every committed row

    def _deferred(self, conn: sa.Connection) -> bool:
        """Whether ``defer_index`` has dropped the indexes a first load builds after its rows."""
        name = f"{self.table.name}_keywords_idx"
        return conn.execute(sa.select(sa.func.to_regclass(sa.func.quote_ident(name)))).scalar_one() is None

    # -- writes ----------------------------------------------------------------------

    def _write(self, conn: sa.Connection, records: list[VectorRecord], delta: Delta, *, bulk: bool = True) -> None:
        if not records:
            return
        if bulk and len(records) >= BULK_LOAD_ROWS and self._empty_for_bulk(conn):
            self._load_then_index(conn, records)
            return
        staging = f"vs_staging_{self.table.name}"
        raw = driver(conn)
        raw.execute(
            sql.SQL("CREATE TEMP TABLE IF NOT EXISTS {} (LIKE {} INCLUDING DEFAULTS) ON COMMIT DROP").format(
                sql.Identifier(staging), sql.Identifier(self.table.name)
            )
        )
        self.copy_rows(raw, staging, records)
        insert_replacing(conn, self.table, sa.table(staging, *(sa.column(c) for c in COLUMNS)), delta, name=self.name)
        raw.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(staging)))

    def copy_rows(self, raw: psycopg.Connection[Any], table: str, records: Sequence[VectorRecord]) -> None:
        """Binary COPY of ``records`` into ``table`` (this collection's, or its staging table: ``writing.py``)."""
        copy_rows(raw, table, records, table=self.table, schema=self._store.schema, analyzer=self.keyword_analyzer)

    def _empty_for_bulk(self, conn: sa.Connection) -> bool:
        lock_table = sql.SQL("LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE").format(sql.Identifier(self.table.name))
        driver(conn).execute(lock_table)
        return conn.execute(sa.select(sa.exists().select_from(self.table))).scalar_one() is False

    def _load_then_index(self, conn: sa.Connection, records: list[VectorRecord]) -> None:
        """Bulk load into an empty table: drop HNSW and the GIN, COPY, rebuild (an index build beats inserts)."""
        indexes = bulk_indexes(self.table)
        for index in indexes:
            index.drop(conn, checkfirst=True)
        self.copy_rows(driver(conn), self.table.name, records)
        if self.keyword_analyzer is not None:
            count_rows(conn, self.table)
        self._prepare_build(conn)
        for index in indexes:
            index.create(conn)
        self._analyze(conn)

    def _analyze(self, conn: sa.Connection) -> None:
        """Fresh row count and statistics after a bulk load: the search planner reads the row count."""
        driver(conn).execute(sql.SQL("ANALYZE {}").format(sql.Identifier(self.table.name)))

    def _prepare_build(self, conn: sa.Connection) -> None:
        schema = self._store.schema
        prepare_build(
            conn, self.table, dimensions=self.dimensions, m=schema.hnsw_m, workers=self._store.index_build_workers
        )


def _floats(value: Any) -> list[float]:
    """A stored vector as floats: a ``vector`` column reads as a list or an array, a ``halfvec`` as a HalfVector."""
    items = value.to_list() if hasattr(value, "to_list") else value
    return [float(x) for x in items]
