"""The storage limit, with nothing of vectorsync inside the timing: a raw binary COPY of a collection's final
rows into a table of the same shape, then the same index builds.

The rows (ids, vectors, text, metadata, and the keyword columns where the collection has them) are read
beforehand as one ``COPY ... TO STDOUT (FORMAT BINARY)`` stream into a file, and the table's index definitions
from ``pg_indexes``. Timed: ``CREATE TABLE ... (LIKE ... INCLUDING DEFAULTS)``, one ``COPY ... FROM STDIN
(FORMAT BINARY)`` of that file, and each ``CREATE INDEX`` as the collection's table has it, with the HNSW
build's memory and parallel workers the collection builds with. A change to vectorsync's write path (its
analyzer, its COPY) no longer moves the limit it is measured against.
"""

from __future__ import annotations

import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from bench.cpu import CpuMeter

__all__ = ["Limit", "index_statements", "measure"]

#: Bytes per COPY FROM write.
BLOCK = 1 << 20
_INDEX = re.compile(r"^CREATE (UNIQUE )?INDEX (\S+) ON (\S+) (USING .*)$")


@dataclass(frozen=True)
class Limit:
    """Seconds to load and index ``rows`` rows (``copy`` of them the COPY, ``build`` the indexes), and the CPU
    seconds that took (``cpu``, with a meter: this process tree's and PostgreSQL's, as ``CpuMeter.parts``)."""

    rows: int
    copy: float
    build: float
    cpu: tuple[float, float] | None = None

    @property
    def seconds(self) -> float:
        return self.copy + self.build


def index_statements(conn: psycopg.Connection, table: str, copy: str) -> list[str]:
    """``table``'s index definitions, rewritten onto ``copy`` (the primary key's as a unique index)."""
    rows = conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = %s "
        "ORDER BY indexname",
        (table,),
    ).fetchall()
    statements: list[str] = []
    for name, definition in rows:
        found = _INDEX.match(definition)
        if found is None:
            raise ValueError(f"index {name} of {table}: cannot read its definition {definition!r}")
        unique, _, _, using = found.groups()
        renamed = sql.Identifier(f"{copy}_{len(statements)}_idx").as_string(conn)
        statements.append(f"CREATE {unique or ''}INDEX {renamed} ON {sql.Identifier(copy).as_string(conn)} {using}")
    return statements


def measure(url: str, table: str, *, build_memory_mb: int, build_workers: int, meter: CpuMeter | None = None) -> Limit:
    """The limit for ``table`` as it stands: its rows copied into a new table and indexed, timed; the new
    table dropped afterwards. ``build_memory_mb`` and ``build_workers``: the collection's HNSW build's
    ``maintenance_work_mem`` and ``max_parallel_maintenance_workers``; ``meter``: CPU seconds too."""
    copy = f"{table}_limit"
    with tempfile.TemporaryDirectory(prefix="vslimit") as folder, psycopg.connect(url, autocommit=True) as conn:
        rows_file = Path(folder) / "rows.bin"
        source = sql.Identifier(table)
        with (
            rows_file.open("wb") as out,
            conn.cursor().copy(sql.SQL("COPY {} TO STDOUT (FORMAT BINARY)").format(source)) as stream,
        ):
            for data in stream:
                out.write(data)
        statements = index_statements(conn, table, copy)
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(copy)))
        conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", (f"{build_memory_mb}MB",))
        conn.execute("SELECT set_config('max_parallel_maintenance_workers', %s, false)", (str(build_workers),))
        try:
            used = meter.parts() if meter else None
            start = time.perf_counter()
            with conn.transaction():
                conn.execute(
                    sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING DEFAULTS)").format(sql.Identifier(copy), source)
                )
                with (
                    rows_file.open("rb") as rows_in,
                    conn.cursor().copy(
                        sql.SQL("COPY {} FROM STDIN (FORMAT BINARY)").format(sql.Identifier(copy))
                    ) as stream,
                ):
                    while block := rows_in.read(BLOCK):
                        stream.write(block)
            copied = time.perf_counter()
            for statement in statements:
                conn.execute(statement.encode())
            built = time.perf_counter()
            cpu = meter.since(used) if meter and used else None
            rows = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(copy))).fetchone()
        finally:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(copy)))
    return Limit(rows=int(rows[0]) if rows else 0, copy=copied - start, build=built - copied, cpu=cpu)
