"""A pgvector collection: one table, HNSW search with iterative scans, binary COPY writes.

Every write is one transaction, so ``replace_where`` readers see the old set
or the new set. A load of ``BULK_LOAD_ROWS`` or more into an empty table
builds the HNSW index after the rows, which is far faster than inserting into it.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np
import psycopg
import sqlalchemy as sa
from psycopg import sql
from sqlalchemy.dialects.postgresql import ARRAY, BYTEA
from sqlalchemy.dialects.postgresql import insert as pg_insert

import store.vectors.pgvector.segments as segments
from store.connect.postgres import advisory_lock, driver
from store.errors import StoreError, StoreUnavailable
from store.vectors.base import Collection, Metric, QueryEmbedder
from store.vectors.filters import Filter
from store.vectors.indexed import IndexedFields
from store.vectors.pgvector.building import IndexBuild, build_lock_key, read_progress
from store.vectors.pgvector.filters import compile_filter
from store.vectors.pgvector.keywords import Delta, count_rows, drifted_terms, ranked
from store.vectors.pgvector.planner import OVERSHOOT, Plan, Ranking, exact_search, observe, plan
from store.vectors.pgvector.schema import Schema, bulk_indexes, ensure_field_indexes
from store.vectors.records import ChunkDigest, StoredChunk, VectorMatch, VectorRecord, canonical_json, text_digest

__all__ = ["BULK_LOAD_ROWS", "PgvectorCollection", "PgvectorParts", "build_memory_mb"]

_log = logging.getLogger(__name__)

#: A load this large into an empty table builds the HNSW index after the rows (much faster).
BULK_LOAD_ROWS = 2000
#: A write of more ids than this locks the table from other writers, not each id (``_lock_ids``).
MAX_ID_LOCKS = 1000
#: Times a write deletes and inserts again the rows another writer inserted between its DELETE and INSERT.
REPLACE_TRIES = 20
#: The most memory one HNSW build is given (a million 1536-d vectors need about this much).
MAX_BUILD_MEMORY_MB = 8192

_COLUMNS = (
    "id",
    "record_id",
    "chunk",
    "embedding",
    "text",
    "metadata",
    "model",
    "keywords",
    "keyword_length",
    "kwdoc",
    "text_hash",
)
#: The advisory lock of a key, as ``advisory_lock`` takes it; and the lock of each row id of an array, in its order.
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
_LOCK_IDS = "SELECT count(pg_advisory_xact_lock(hashtextextended(%s || id, 0))) FROM unnest(%s::text[]) AS id"
#: The terms of a row in a collection that keeps no keyword index.
_NO_TERMS: Counter[str] = Counter()
_COPY_TYPES = ["text", "text", "int4", None, "text", "jsonb", "text", "jsonb", "int4", "int8", "bytea"]


class PgvectorParts(Protocol):
    """What a collection uses of its store (``PgvectorStore`` is one): its vector space and query embedder, its
    engine and transactions, its schema, how vectors are adapted, and how searches are tuned."""

    dimensions: int
    metric: Metric
    embedder: QueryEmbedder | None
    engine: sa.Engine
    schema: Schema
    exact_search_rows: int
    index_build_workers: int

    def transaction(self) -> AbstractContextManager[sa.Connection]: ...

    def adapt(self, vector: np.ndarray) -> Any: ...

    def tune_search(self, conn: sa.Connection, *, filtered: bool = False) -> None: ...


class PgvectorCollection(Collection):
    """One collection, one table."""

    def __init__(self, store: PgvectorParts, name: str, table: sa.Table) -> None:
        super().__init__(name, dimensions=store.dimensions, metric=store.metric, embedder=store.embedder)
        self._store = store
        self.table = table
        self.parallel_legs = True  # each leg is one query on a pooled connection: hybrid waits for the slower

    def _delta(self, conn: sa.Connection) -> Delta:
        """The statistics changes of a write; nothing counted when the collection keeps no keyword index."""
        return Delta(conn, self.table, counting=self.keyword_analyzer is not None, purge=segments.purge)

    def _where(self, filter: Filter | None) -> sa.ColumnElement[bool]:
        return sa.true() if filter is None else compile_filter(filter, self.table, self.indexed)

    def _upsert(self, records: list[VectorRecord]) -> None:
        with self._store.transaction() as conn:
            self._lock_ids(conn, [r.id for r in records])
            delta = self._delta(conn)
            self._write(conn, records, delta)
            delta.apply()
        self._merge_segments()

    def _delete_ids(self, ids: list[str]) -> None:
        with self._store.transaction() as conn:
            self._lock_ids(conn, ids)
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
            self._lock_ids(conn, [r.id for r in records], swap=filter)
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
                self._lock_ids(conn, ids)
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
                rows = segments.best(conn, self.table, terms, where=where, limit=limit)
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

    # -- COPY ------------------------------------------------------------------------

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
        self._insert_replacing(conn, sa.table(staging, *(sa.column(c) for c in _COLUMNS)), delta)
        raw.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(staging)))

    def _lock_ids(self, conn: sa.Connection, ids: list[str], *, swap: Filter | None = None) -> None:
        """Take the advisory lock of each row id this write may write, in sorted order, first: two writes of one
        id take turns whole, and writes of overlapping ids never wait for each other in a cycle. A write of more
        than ``MAX_ID_LOCKS`` ids locks the table from other writers instead (PostgreSQL's lock table is finite);
        a smaller one holds the table's writers' lock before its ids, so it never waits for such a write while
        holding ids. Between the two, a swap of ``swap``'s set locks that set: two swaps of one set wait for each
        other, else the second one's DELETE could miss rows the first one is inserting (both sets would stay)."""
        mode = "SHARE ROW EXCLUSIVE" if len(ids) > MAX_ID_LOCKS else "ROW EXCLUSIVE"
        raw, name = driver(conn), self.table.name
        with raw.pipeline():  # one round trip
            raw.execute(sql.SQL("LOCK TABLE {} IN {} MODE").format(sql.Identifier(name), sql.SQL(mode)))
            if swap is not None:
                raw.execute(_LOCK, [f"{name}:{canonical_json(swap.to_dict())}"])
            if len(ids) <= MAX_ID_LOCKS:
                raw.execute(_LOCK_IDS, [f"{name}:id:", sorted(set(ids))])  # unnest keeps the array's order

    def _insert_replacing(self, conn: sa.Connection, load: sa.TableClause, delta: Delta) -> None:
        """Write the staged rows, each replacing the row of its id, counting the keyword statistics exactly.

        A row is replaced by a DELETE and an INSERT, each counted from its own RETURNING, never by an UPDATE:
        PostgreSQL before 18 cannot return the row an UPDATE replaced, and the row read before it (FOR UPDATE)
        could be one that a concurrent swap deleted and wrote again meanwhile (the FOR UPDATE skipped it, the
        UPDATE met the new one: counted in, never out). An id some writer outside ``_lock_ids`` inserted between
        the two is deleted and inserted again."""
        t = self.table.c
        written = sa.exists().where(t.id == load.c.id, t.kwdoc == load.c.kwdoc)
        for _ in range(REPLACE_TRIES):
            delta.delete(sa.delete(self.table).where(t.id.in_(sa.select(load.c.id))))
            insert = pg_insert(self.table).from_select(list(_COLUMNS), sa.select(*load.c).order_by(load.c.id))
            delta.add(insert.on_conflict_do_nothing(index_elements=["id"]).returning(t.keywords, t.keyword_length), 1)
            if not conn.execute(sa.select(sa.exists().where(~written).select_from(load))).scalar():
                return
            conn.execute(sa.delete(load).where(written))
        raise StoreUnavailable(f"rows of {self.name!r} kept being written by another writer meanwhile: try again")

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
        _prepare_build(
            conn, self.table, dimensions=self.dimensions, m=schema.hnsw_m, workers=self._store.index_build_workers
        )

    def copy_rows(self, raw: psycopg.Connection[Any], table: str, records: Sequence[VectorRecord]) -> None:
        """Binary COPY of ``records`` into ``table`` (~50k rows/s, versus hundreds row by row), each with a new
        kwdoc, and their keyword postings as one segment (``segments.py``); a collection that keeps no keyword
        index analyzes nothing and writes empty terms and no segment."""
        kwdocs = segments.allocate(raw, self.table, len(records))
        terms_of = self.keyword_analyzer
        posted = []
        columns = sql.SQL(", ").join(sql.Identifier(c) for c in _COLUMNS)
        statement = sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT BINARY)").format(sql.Identifier(table), columns)
        types = [t or self._store.schema.vector_type for t in _COPY_TYPES]
        with raw.cursor() as cursor, cursor.copy(statement) as copy:
            copy.set_types(types)
            for r, kwdoc in zip(records, kwdocs, strict=True):
                record_id, chunk = r.metadata.get("record_id"), r.metadata.get("chunk")
                vector = np.asarray(r.embedding, dtype=np.float32)
                terms = terms_of.frequencies(r.text) if terms_of is not None else _NO_TERMS
                copy.write_row(
                    (
                        r.id,
                        record_id,
                        chunk,
                        self._store.adapt(vector),
                        r.text,
                        psycopg.types.json.Jsonb(r.metadata),
                        r.model,
                        psycopg.types.json.Jsonb(dict(terms)),
                        sum(terms.values()),
                        kwdoc,
                        bytes.fromhex(text_digest(r.text)),
                    )
                )
                if terms_of is not None:
                    posted.append(segments.Posted(kwdoc, terms))
        if posted:
            segments.write(raw, self.table, posted)


def _prepare_build(conn: sa.Connection, table: sa.Table, *, dimensions: int, m: int, workers: int) -> None:
    """Size this transaction's HNSW build: memory for the whole graph (else the build slows several times
    once it spills) and PostgreSQL's parallel build workers."""
    rows = conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
    megabytes = build_memory_mb(rows, dimensions=dimensions, m=m)
    conn.execute(sa.select(sa.func.set_config("maintenance_work_mem", f"{megabytes}MB", sa.true())))
    conn.execute(sa.select(sa.func.set_config("max_parallel_maintenance_workers", str(workers), sa.true())))


def build_memory_mb(rows: int, *, dimensions: int, m: int) -> int:
    """The maintenance_work_mem an HNSW build of ``rows`` vectors gets: the whole graph, 30% spare, capped."""
    per_row = dimensions * 4 + m * 2 * 16 + 200  # the vector, its neighbour lists, the element's bookkeeping
    return min(max(64, int(rows * per_row * 1.3 / 2**20)), MAX_BUILD_MEMORY_MB)


def _floats(value: Any) -> list[float]:
    """A stored vector as floats: a ``vector`` column reads as a list or an array, a ``halfvec`` as a HalfVector."""
    items = value.to_list() if hasattr(value, "to_list") else value
    return [float(x) for x in items]
