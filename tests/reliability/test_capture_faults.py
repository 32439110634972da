"""Change capture under faults: a worker killed mid-drain, the broker down while writes go on, PostgreSQL
restarted, two relays at once. The writers are plain psycopg; each scenario ends with store == source, an
empty outbox and every run ended (``Rig.verify``)."""

from __future__ import annotations

import ast
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa

from store.contract import INDEX_BATCH, INDEX_RECORD
from tests.crm import OUTBOX, Psql, insert_notes, note, stored_chunks
from tests.reliability.conftest import Rig, kill_tree, make_rig, restart_postgres
from tests.reliability.test_crashes import _embedded_postgres_only
from tests.workers import run_cli, wait_for

#: The one deliberate hold of these scenarios: how long the broker stays down while writes go on.
BROKER_DOWN_SECONDS = 30
#: These scenarios send a flood to workers that have just started: a pool process's first batch pays for
#: building its clients (openai's import alone is a second; 15 s seen under xdist on a loaded 2-core machine),
#: which the rig's usual 6 s would cut short again and again. A claim takes 100 rows, so a flood takes many.
CAPTURE_TIME_LIMIT = 25


@pytest.fixture
def rig(tmp_path: Path, postgres_url: str) -> Iterator[Rig]:
    """The rig with change capture on its collection, installed as a deploy does (``vectorsync init``)."""
    with make_rig(
        tmp_path,
        postgres_url,
        capture=True,
        time_limit=CAPTURE_TIME_LIMIT,
        sections="[capture]\npoll_seconds = 1\nclaim_rows = 100\n",
    ) as made:
        init = run_cli(made.config, "init")
        assert init.returncode == 0, init.stdout + init.stderr
        yield made


@pytest.fixture
def sql(rig: Rig) -> Iterator[Psql]:
    writer = Psql(rig.database)
    yield writer
    writer.close()


def _indexed(rig: Rig) -> int:
    """Records with chunks in the store."""
    return len({chunk.rsplit(":", 1)[0] for chunk in stored_chunks(rig.database, rig.table)})


def _verify(rig: Rig, scenario: str, *, faults: int, timeout: float = 180) -> None:
    """``Rig.verify``, once the cheap signs are there (the outbox empty, as many records indexed as the source
    has): its full comparison, chunking every row, is done once rather than every second meanwhile."""

    def drained() -> bool:
        with rig.crm.engine.connect() as conn:
            rows = conn.execute(sa.text(f'SELECT count(*) FROM "{rig.crm.name}"')).scalar_one()
        return rig.outbox() == 0 and _indexed(rig) == rows

    try:
        wait_for(drained, timeout=timeout, every=0.5, what=f"{scenario}: the outbox to drain")
    finally:  # the figures are recorded either way
        rig.verify(scenario, faults=faults, timeout=30)


def _unacked(rig: Rig) -> int:
    """Messages the broker has delivered and not had acknowledged (kombu's ``unacked`` hash in Redis)."""
    client = redis.Redis.from_url(rig.broker.url)
    try:
        return int(client.hlen("unacked"))
    finally:
        client.close()


def _counted(rig: Rig, *workers: str) -> int:
    """Records the index tasks of these workers counted (done, skipped or failed) in the tasks that succeeded,
    as their logs say: each id sent once and indexed once counts once."""
    total = 0
    for worker in workers:
        log = (rig.config.parent / f"{worker}.log").read_text(errors="replace")
        for name, counts in re.findall(r"Task ([\w.]+)\[[0-9a-f-]+\] succeeded in [0-9.e-]+s: (\{[^}]*\})", log):
            if name in (INDEX_BATCH, INDEX_RECORD):
                total += sum(ast.literal_eval(counts).values())
    return total


def test_a_worker_killed_with_kill_9_mid_drain(rig: Rig, sql: Psql) -> None:
    rig.primary.always(delay=0.05)  # tasks flow for a while
    holder = Psql(rig.database)
    try:
        with rig.worker("victim", concurrency=2) as victim:
            insert_notes(sql, rig.crm.name, [note(i) for i in range(1, 3001)])  # 3,000 rows in one statement
            # The newest 1,000 outbox rows are held, as a slower relay would still have them: the kill finds
            # rows claimed and sent, rows sent and not yet deleted, and rows not claimed at all.
            with holder.transaction():
                held = holder.run(
                    f"SELECT seq FROM {OUTBOX} WHERE collection = %s ORDER BY seq DESC LIMIT 1000 "
                    "FOR UPDATE SKIP LOCKED",
                    (rig.collection,),
                )
                wait_for(lambda: _indexed(rig) >= 300, timeout=60, what="tasks to flow")
                kill_tree(victim)  # the main process (and its relay) and its pool, as an OOM kill would
                pending, indexed = rig.outbox(), _indexed(rig)
                assert pending is not None and pending >= len(held) > 0, (pending, len(held))
                assert indexed < 3000
                print(f"capture: worker killed with {pending} rows in the outbox, {indexed} records indexed")
    finally:
        holder.close()
    rig.primary.always()
    with rig.worker("survivor", concurrency=2):
        _verify(rig, "capture: worker kill -9 mid-drain of 3,000 rows", faults=1, timeout=180)


def test_the_broker_down_30_s_while_writes_go_on(rig: Rig, sql: Psql) -> None:
    table = rig.crm.name
    insert_notes(sql, table, [note(i) for i in range(1, 201)])
    rng = random.Random(3)
    with rig.worker(concurrency=2):
        # Every message acknowledged before the kill: kombu 5.7 loses the worker (AttributeError in
        # restore_unacked, "Unrecoverable error") when the connection drops with one unacknowledged.
        wait_for(
            lambda: rig.outbox() == 0 and _indexed(rig) == 200 and _unacked(rig) == 0,
            timeout=60,
            what="the first 200 rows, acknowledged",
        )
        rig.broker.kill()
        written, step, next_id = 0, 0, 1000
        down = time.monotonic()
        while time.monotonic() - down < BROKER_DOWN_SECONDS:  # a write every 0.2 s: a client does not wait
            step += 1
            if step % 3 == 0:
                insert_notes(sql, table, [note(next_id)])
                next_id += 1
                written += 1
            elif step % 3 == 1:
                i = rng.randint(1, 200)
                written += len(
                    sql.run(
                        f'UPDATE "{table}" SET body = %s WHERE id = %s RETURNING id', (note(i, version=step)["body"], i)
                    )
                )
            else:
                written += len(sql.run(f'DELETE FROM "{table}" WHERE id = %s RETURNING id', (rng.randint(1, 200),)))
            time.sleep(0.2)
        # Nothing could be sent, so nothing was deleted: every change waits in the outbox.
        assert written > 50 and rig.outbox() == written, (rig.outbox(), written)
        rig.broker.start()
        back = time.monotonic()
        _verify(rig, f"capture: broker down {BROKER_DOWN_SECONDS} s while writes go on", faults=1, timeout=120)
        print(
            f"capture: {written} changes written while the broker was down, in line "
            f"{time.monotonic() - back:.1f} s after it came back"
        )


def test_postgres_restarted_while_changes_drain(rig: Rig, sql: Psql) -> None:
    _embedded_postgres_only()
    rig.primary.always(delay=0.03)
    holder = Psql(rig.database)
    with rig.worker(concurrency=2):
        insert_notes(sql, rig.crm.name, [note(i) for i in range(1, 1501)])
        # The newest 500 outbox rows are held by a transaction the restart ends: they are still to relay then.
        holder.run("BEGIN")
        held = holder.run(
            f"SELECT seq FROM {OUTBOX} WHERE collection = %s ORDER BY seq DESC LIMIT 500 FOR UPDATE SKIP LOCKED",
            (rig.collection,),
        )
        wait_for(lambda: _indexed(rig) >= 150, timeout=60, what="tasks to flow")
        pending = rig.outbox()
        assert pending is not None and pending >= len(held) > 0, (pending, len(held))
        print(f"capture: PostgreSQL stopped with {pending} rows in the outbox, {_indexed(rig)} records indexed")
        restart_postgres(rig.database)
        holder.close()  # its server process is gone, and its locks with it
        rig.primary.always()
        # Written after the restart, on a new connection: the relay's LISTEN and its claims start again.
        after = Psql(rig.database)
        try:
            after.run(f'UPDATE "{rig.crm.name}" SET body = %s WHERE id = 7', (note(7, version=1)["body"],))
            after.run(f'DELETE FROM "{rig.crm.name}" WHERE id BETWEEN 1400 AND 1409')
            insert_notes(after, rig.crm.name, [note(i) for i in range(2001, 2011)])
        finally:
            after.close()
        _verify(rig, "capture: PostgreSQL restarted while changes drain", faults=1, timeout=180)


def test_two_relays_at_once_share_the_outbox(rig: Rig, sql: Psql) -> None:
    with rig.worker("w1", concurrency=1), rig.worker("w2", concurrency=1):
        insert_notes(sql, rig.crm.name, [note(i) for i in range(1, 3001)])  # a flood both relays claim
        for i in range(5001, 5101):  # and single-row writes meanwhile, each id written once
            insert_notes(sql, rig.crm.name, [note(i)])
        _verify(rig, "capture: two relays (two workers) at once", faults=0, timeout=180)
        # SKIP LOCKED: no row claimed by both, so each of the 3,100 ids was sent, and indexed, once.
        wait_for(lambda: _counted(rig, "w1", "w2") >= 3100, timeout=30, what="the workers to log their tasks")
        assert _counted(rig, "w1", "w2") == 3100
