"""What must hold once every fault is healed, the writes have stopped and the system is quiet: each check returns
what breaks it (empty: it holds)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from store.connect.postgres import engine_url
from store.state.ledger.postgres import PostgresLedger
from tests.crm import OUTBOX, expected_chunks, stored_chunks
from tests.reliability.chaos.system import PUSHED, SQL, System

__all__ = ["broken", "caught_up", "ended", "figures", "stale_documents", "unended"]

Chunks = dict[str, tuple[str, dict[str, Any]]]


def _record(chunk_id: str) -> str:
    return chunk_id.rsplit(":", 1)[0]


def _pushed_chunks(system: System, documents: dict[str, tuple[str, dict[str, Any]] | None]) -> Chunks:
    from worker.pipeline.chunker import Chunker

    chunker = Chunker.from_settings(system.settings.collections[PUSHED].chunker)
    expected = {}
    for doc, state in documents.items():
        if state is not None:
            for index, chunk in enumerate(chunker.split(state[0])):
                expected[f"{doc}:{index}"] = (chunk.text, {**state[1], "record_id": doc, "chunk": index})
    return expected


def _table(system: System, collection: str) -> str:
    return system.settings.vectors.table_prefix + collection


def _differences(name: str, expected: Chunks, stored: Chunks) -> list[str]:
    wrong = sorted({_record(k) for k, v in expected.items() if stored.get(k) != v})
    extra = sorted({_record(k) for k in stored if k not in expected})
    found = []
    if wrong:
        found.append(f"{name}: {len(wrong)} records missing or stale in the store, e.g. {wrong[:5]}")
    if extra:
        found.append(f"{name}: {len(extra)} records with chunks the source does not have, e.g. {extra[:5]}")
    return found


def _ledger(system: System, collection: str, stored: Chunks) -> list[str]:
    ledger = PostgresLedger(system.database)
    try:
        ids = ledger.record_ids(collection)
        entries = ledger.entries(collection, sorted(ids))
    finally:
        ledger.close()
    chunks = Counter(_record(k) for k in stored)
    off = sorted(
        i
        for i in ids | set(chunks)
        if (entries[i].chunks if i in entries else None) != chunks.get(i, 0)
        and not (i in entries and entries[i].chunks == 0 and i not in chunks)
    )
    return [f"{collection}: the ledger and the store disagree on {len(off)} records, e.g. {off[:5]}"] if off else []


def _keyword_statistics(system: System, collection: str) -> list[str]:
    table = _table(system, collection)
    engine = sa.create_engine(engine_url(system.database))
    try:
        with engine.connect() as conn:
            if conn.execute(sa.text("SELECT to_regclass(:t)"), {"t": f"{table}_kwstats"}).scalar() is None:
                return []
            kept = {
                r.term: (r.docs, r.tokens)
                for r in conn.execute(
                    sa.text(  # test-owned names
                        f'SELECT term, sum(docs) AS docs, sum(tokens) AS tokens FROM "{table}_kwstats" GROUP BY term '
                        "HAVING sum(docs) <> 0 OR sum(tokens) <> 0"
                    )
                )
            }
            recount = {
                r.term: (r.docs, 0)
                for r in conn.execute(
                    sa.text(
                        f'SELECT k AS term, count(*) AS docs FROM "{table}", jsonb_object_keys(keywords) AS k '
                        "GROUP BY k"
                    )
                )
            }
            total = conn.execute(
                sa.text(f'SELECT count(*), coalesce(sum(keyword_length), 0) FROM "{table}" WHERE keyword_length > 0')
            ).one()
            if total[0]:
                recount[""] = (total[0], total[1])
    finally:
        engine.dispose()
    off = sorted(t for t in kept.keys() | recount.keys() if kept.get(t) != recount.get(t))
    return (
        [f"{collection}: keyword statistics differ from a recount on {len(off)} terms, e.g. {off[:5]}"] if off else []
    )


def _running(system: System, *, before: datetime | None = None) -> list[str]:
    """The runs not ended (those started before ``before``, when given)."""
    ledger = PostgresLedger(system.database)
    try:
        return [
            r.run_id[:8]
            for r in ledger.recent_runs(100_000)
            if not r.status.ended and (before is None or r.started_at < before)
        ]
    finally:
        ledger.close()


def _runs_and_failures(system: System) -> list[str]:
    running = _running(system)
    ledger = PostgresLedger(system.database)
    try:
        failures = ledger.failures()
    finally:
        ledger.close()
    found = [f"{len(running)} runs left running: {running[:5]}"] if running else []
    if failures:  # no bad row is injected: every failure is a fault's
        found.append(f"{len(failures)} failures rows, e.g. {[(f.record_id, f.error[:80]) for f in failures[:3]]}")
    return found


def _outbox(system: System) -> int:
    engine = sa.create_engine(engine_url(system.database))
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text(f"SELECT count(*) FROM {OUTBOX}")).scalar_one())
    finally:
        engine.dispose()


def state(
    system: System, documents: dict[str, tuple[str, dict[str, Any]] | None]
) -> tuple[Chunks, Chunks, Chunks, Chunks]:
    """(expected, stored) chunks of the SQL collection, then of the pushed one."""
    rows = system.crm.rows()
    return (
        expected_chunks(system.settings, SQL, rows),
        stored_chunks(system.database, _table(system, SQL)),
        _pushed_chunks(system, documents),
        stored_chunks(system.database, _table(system, PUSHED)),
    )


def caught_up(system: System, documents: dict[str, tuple[str, dict[str, Any]] | None]) -> bool:
    """The outbox empty and both collections equal to their sources (runs may still be sweeping)."""
    sql_expected, sql_stored, pushed_expected, pushed_stored = state(system, documents)
    return _outbox(system) == 0 and sql_expected == sql_stored and pushed_expected == pushed_stored


def ended(system: System, *, before: datetime | None = None) -> bool:
    """Every run has ended (every run started before ``before``, when given)."""
    return not _running(system, before=before)


def unended(system: System) -> list[str]:
    """What the runs left running are: kind, collection, status, processed of total, batches, age."""
    from datetime import UTC, datetime

    ledger = PostgresLedger(system.database)
    try:
        now = datetime.now(UTC)
        return [
            f"{r.run_id[:8]} {r.kind} {r.collection} {r.status} {r.processed}/{r.total} batches {r.batches} "
            f"started {(now - r.started_at).total_seconds():.0f}s ago"
            for r in ledger.recent_runs(100_000)
            if not r.status.ended
        ]
    finally:
        ledger.close()


def broken(system: System, documents: dict[str, tuple[str, dict[str, Any]] | None]) -> list[str]:
    """Every invariant that does not hold, said in a line each."""
    sql_expected, sql_stored, pushed_expected, pushed_stored = state(system, documents)
    found = _differences(SQL, sql_expected, sql_stored) + _differences(PUSHED, pushed_expected, pushed_stored)
    found += _runs_and_failures(system)
    if pending := _outbox(system):
        found.append(f"{pending} rows left in the outbox")
    found += _ledger(system, SQL, sql_stored) + _ledger(system, PUSHED, pushed_stored)
    found += _keyword_statistics(system, SQL) + _keyword_statistics(system, PUSHED)
    return found


def stale_documents(system: System, documents: dict[str, tuple[str, dict[str, Any]] | None]) -> list[str]:
    """The pushed documents the store does not hold as last pushed (missing, stale, or deleted and still there)."""
    _, _, expected, stored = state(system, documents)
    wrong = {_record(k) for k, v in expected.items() if stored.get(k) != v}
    return sorted(wrong | {_record(k) for k in stored if k not in expected})


def figures(system: System, documents: dict[str, tuple[str, dict[str, Any]] | None]) -> dict[str, int]:
    """The reliability table's figures of both collections: records, lost, duplicated (chunks of records the
    source does not have), runs left running, outbox rows; and how many of the lost and duplicated are pushed
    documents (the chaos runs' table, ``tests/reliability/chaos/runs.json``, counts them apart)."""
    sql_expected, sql_stored, pushed_expected, pushed_stored = state(system, documents)
    (lost, extra), (lost_documents, extra_documents) = (
        (
            len({_record(k) for k, v in expected.items() if stored.get(k) != v}),
            len({_record(k) for k in stored if k not in expected}),
        )
        for expected, stored in ((sql_expected, sql_stored), (pushed_expected, pushed_stored))
    )
    records = len({_record(k) for k in sql_expected}) + len({_record(k) for k in pushed_expected})
    return {
        "records": records,
        "lost": lost + lost_documents,
        "duplicated": extra + extra_documents,
        "lost_documents": lost_documents,
        "duplicated_documents": extra_documents,
        "running": len(_running(system)),
        "outbox": _outbox(system),
    }
