"""What change capture's trigger costs the writer: single-row INSERT and UPDATE rates with the trigger, with
the trigger and NOTIFY, and without either, from 1 and 4 concurrent writers.

Three copies of the source table, the same rows: one with no trigger, one captured as by default, one captured
with ``capture_notify``. The writers are plain psycopg connections in processes of their own (autocommit: each
statement is a transaction, where the trigger costs most). The modes take turns of ``SLOT`` seconds, every
writer in the same mode at once, so the machine's drift (other work on these cores) touches them alike. The
workers are stopped: the figure is the writer's own cost, not the relay's or the indexing's CPU on the same
cores. What bounds it is read from ``EXPLAIN ANALYZE`` (the trigger's time inside a statement, the outbox
insert alone) and from the WAL each statement writes.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import psycopg

from bench.report import Row
from bench.targets import judged
from store.capture import control
from store.settings import load_settings
from tests.crm import OUTBOX, WORDS, CrmTable
from tests.settings_files import sql_collection

__all__ = ["Cost", "rates", "tables", "trigger_cost", "writes"]

SECTION = "capture"
CLIENTS = (1, 4)
#: Seconds of each mode's turn: short, so the machine's drift touches every mode alike.
SLOT = 0.02
OPERATIONS = ("INSERT", "UPDATE")
#: Mode -> the table it writes: no trigger, the trigger (the default), the trigger with NOTIFY.
TABLES = {"off": "writes_off", "trigger": "writes_trigger", "trigger + NOTIFY": "writes_notify"}
#: The statements to time: one row, bound values, prepared by psycopg after a few runs.
STATEMENTS = {
    "INSERT": 'INSERT INTO "{table}" (id, title, body, kind) VALUES (%s, %s, %s, %s)',
    "UPDATE": 'UPDATE "{table}" SET body = %s WHERE id = %s',
}
SETTINGS = """
[vectors]
store = "pgvector"
url = "{url}"
dimensions = 8
[models.fake]
provider = "fake"
model = "fake"
dimensions = 8
[embeddings]
chain = ["fake"]
cache_ttl_days = 0
"""


def tables(url: str, source: str, folder: Path) -> None:
    """The three tables, each a copy of ``source``; capture installed on two of them (one with NOTIFY)."""
    text = SETTINGS.format(url=url)
    for mode, table in TABLES.items():
        CrmTable(url, table).close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'INSERT INTO "{table}" SELECT * FROM "{source}"')
            conn.execute(f'VACUUM ANALYZE "{table}"')
        if mode != "off":
            collection = sql_collection(database=url, table=table, collection=table, capture=True)
            text += (
                collection.replace('capture = "trigger"', 'capture = "trigger"\ncapture_notify = true')
                if "NOTIFY" in mode
                else collection
            )
    config = folder / "writes.toml"
    config.write_text(text)
    settings = load_settings(config)
    for table in settings.collections:
        control.enable(settings, table)


def write_for(url: str, operation: str, records: int, first_id: int, start_at: float, seconds: float) -> list[int]:
    """One writer: single-row statements of ``operation``, autocommit, for ``seconds`` from ``start_at`` (wall
    clock), into the table of the mode whose turn it is (SLOT seconds each, in TABLES' order, the same turns
    in every writer); how many statements each mode ran. A process of its own, so writers are not serialised
    by one interpreter."""
    rng = random.Random(first_id)
    texts = [STATEMENTS[operation].format(table=table) for table in TABLES.values()]
    body = " ".join(WORDS[:10])
    counts = [0] * len(texts)
    with psycopg.connect(url, autocommit=True) as conn:
        time.sleep(max(0.0, start_at - time.time()))
        while (now := time.time()) < start_at + seconds:
            turn = int((now - start_at) / SLOT) % len(texts)
            n = sum(counts)
            if operation == "INSERT":
                conn.execute(texts[turn], (first_id + n, f"Note {first_id + n}", body, "call"))
            else:
                conn.execute(texts[turn], (f"w{first_id} {n} {body}", rng.randint(1, records)))
            counts[turn] += 1
    return counts


def rates(
    pool: ProcessPoolExecutor, url: str, operation: str, records: int, clients: int, seconds: float, first_id: int
) -> dict[str, float]:
    """Statements per second of ``clients`` writers together, per mode, the modes taking SLOT-long turns over
    ``seconds`` (a whole number of rounds), from an empty outbox."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {OUTBOX}")
    start_at = time.time() + 0.5  # every writer connected and waiting
    futures = [
        pool.submit(write_for, url, operation, records, first_id + k * 10_000_000, start_at, seconds)
        for k in range(clients)
    ]
    counts = [sum(column) for column in zip(*(f.result() for f in futures), strict=True)]
    return {mode: count / (seconds / len(TABLES)) for mode, count in zip(TABLES, counts, strict=True)}


@dataclass(frozen=True)
class Cost:
    """Medians of one single-row statement under ``EXPLAIN ANALYZE``, on the captured table and on the one without
    a trigger, taking turns: execution microseconds, the trigger's part, and WAL bytes written per statement."""

    plain: float
    captured: float
    trigger: float
    plain_wal: float
    captured_wal: float


def _plan(conn: psycopg.Connection[Any], statement: str, params: tuple[Any, ...]) -> dict[str, Any]:
    row = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", params).fetchone()
    assert row is not None
    plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
    return dict(plan[0])


def _lsn(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint").fetchone()
    assert row is not None
    return int(row[0])


def trigger_cost(url: str, records: int, operation: str, repeats: int = 300) -> Cost:
    """What one single-row ``operation`` costs with the trigger (the default capture) and without."""
    took: dict[str, list[float]] = {"plain": [], "captured": [], "trigger": []}
    wal = {"plain": 0, "captured": 0}
    with psycopg.connect(url, autocommit=True) as conn:
        for n in range(repeats):
            params = (
                (900_000_000 + n, f"Note {n}", "profiled", "call")
                if operation == "INSERT"
                else (f"profiled {n}", 1 + (n * 7919) % records)
            )
            for kind, table in (("plain", TABLES["off"]), ("captured", TABLES["trigger"])):
                before = _lsn(conn)
                plan = _plan(conn, STATEMENTS[operation].format(table=table), params)
                wal[kind] += _lsn(conn) - before
                took[kind].append(plan["Execution Time"] * 1000)
                if kind == "captured":
                    took["trigger"].append(sum(t["Time"] for t in plan.get("Triggers", [])) * 1000)
    middle = {kind: statistics.median(values) for kind, values in took.items()}
    return Cost(
        middle["plain"], middle["captured"], middle["trigger"], wal["plain"] / repeats, wal["captured"] / repeats
    )


def outbox_insert_cost(url: str, repeats: int = 200) -> float:
    """Median microseconds of the trigger's outbox insert alone (one row), under ``EXPLAIN ANALYZE``."""
    with psycopg.connect(url, autocommit=True) as conn:
        took = [
            _plan(conn, f"INSERT INTO {OUTBOX} (collection, record_id) VALUES ('profiled', %s)", (str(n),))[
                "Execution Time"
            ]
            * 1000
            for n in range(repeats)
        ]
    return statistics.median(took)


def writes(url: str, source: str, records: int, folder: Path, *, quick: bool = False) -> list[Row]:
    """The write-rate rows (each mode against no trigger, same statements, same run) and the trigger's cost."""
    seconds = 1.5 if quick else 8.0
    tables(url, source, folder)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
    rows = []
    with ProcessPoolExecutor(max_workers=max(CLIENTS), mp_context=get_context("spawn")) as pool:
        list(pool.map(time.sleep, [0.5] * max(CLIENTS)))  # every process started before anything is timed
        for number, (operation, clients) in enumerate((o, c) for o in OPERATIONS for c in CLIENTS):
            measured = rates(pool, url, operation, records, clients, seconds, 100_000_000 * (number + 1))
            off = measured["off"]
            for mode in list(TABLES)[1:]:
                on = measured[mode]
                rows.append(
                    Row(
                        SECTION,
                        f"single-row {operation}, {clients} writer{'s' if clients > 1 else ''}, {mode}",
                        on,
                        "rows/s",
                        ratio=on / off,
                        **judged("writes with the capture trigger", on / off),
                        detail=f"without the trigger {off:,.0f} rows/s; the modes took {SLOT * 1000:.0f} ms "
                        f"turns for {seconds:g} s",
                    )
                )
    outbox = outbox_insert_cost(url)
    for operation in OPERATIONS:
        cost = trigger_cost(url, records, operation)
        rows.append(
            Row(
                SECTION,
                f"single-row {operation}: the trigger's time (EXPLAIN ANALYZE)",
                cost.trigger,
                "us",
                detail=f"statement {cost.captured:.0f} us with the trigger, {cost.plain:.0f} us without; "
                f"the outbox insert alone {outbox:.0f} us; WAL {cost.captured_wal:.0f} bytes a "
                f"statement with the trigger, {cost.plain_wal:.0f} without",
            )
        )
    return rows
