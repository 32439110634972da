"""Change capture end to end: real PostgreSQL, real Redis, real ``celery worker`` processes, and writers that
contain no vectorsync code (SQL as ``psql`` or another service would send it, through plain psycopg).

Capture is installed as a deploy would (``vectorsync init``, or a DBA running what ``capture sql`` prints);
the relay runs in the worker's main process, or alone as ``vectorsync relay``. Every change must reach the
index (store == source), and ``capture status``, ``status``, ``doctor`` and the worker's metrics must show
what waits in the outbox.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from store.contract import INDEX_BATCH, INDEX_RECORD
from tests.backends import unique_name
from tests.crm import Psql, insert_notes, note, outbox_rows
from tests.integration.worker.capture_world import MakeWorld, capture_catalog, init_capture, make_world
from tests.workers import ROOT, celery_worker, process_env, run_cli, wait_for

__all__ = ["make_world"]  # the fixture, which the tests take by name

pytestmark = pytest.mark.slow


def test_every_kind_of_write_by_a_plain_client_reaches_the_index(make_world: MakeWorld) -> None:
    world = make_world(columns="ADD COLUMN internal text")  # a column no template, metadata or where reads
    c, t, sql = world.collection, world.source, world.sql
    installed = init_capture(world)
    assert f"capture  {c} on " in installed.stdout, installed.stdout
    assert capture_catalog(sql, t, c) == (
        sorted(f"vs_{c}_{e}" for e in ("ins", "upd", "del", "trn")),
        [f"vs_capture_{c}"],
    )
    # Written before any worker runs: the changes wait in the outbox, committed with the rows.
    insert_notes(sql, t, [note(i) for i in range(1, 121)])
    assert world.pending() == 120
    with celery_worker(world.config) as _worker:
        took = {"120 inserts in one statement (bulk queue)": world.wait_caught_up("the first 120 inserts")}
        assert world.received(INDEX_BATCH) >= 3  # 120 ids in batches of worker.batch_size = 50

        # UPDATEs that leave updated_at alone (source.updated_at is set): a reconcile sweep would never see them.
        stamps = sql.run(f'SELECT id, updated_at FROM "{t}" WHERE id IN (2, 3, 4) ORDER BY id')
        for i in (2, 3, 4):
            sql.run(f'UPDATE "{t}" SET body = %s WHERE id = %s', (note(i, version=1)["body"], i))
        assert sql.run(f'SELECT id, updated_at FROM "{t}" WHERE id IN (2, 3, 4) ORDER BY id') == stamps
        took["3 body updates, updated_at untouched"] = world.wait_caught_up("updates that left updated_at alone")
        sql.run(f"UPDATE \"{t}\" SET kind = 'renewal' WHERE id BETWEEN 10 AND 15")  # metadata only
        took["a metadata update of 6 rows"] = world.wait_caught_up("a metadata update")

        # A table reloaded as a dump is: TRUNCATE, then the rows again with their own updated_at, one of them
        # changed, in one transaction. The truncate marker and the ids are claimed together.
        with sql.transaction():
            sql.run(f'CREATE TEMP TABLE dump ON COMMIT DROP AS SELECT * FROM "{t}"')
            sql.run(f'TRUNCATE "{t}"')
            sql.run(
                f"INSERT INTO \"{t}\" SELECT id, title, CASE WHEN id = 50 THEN 'reloaded with a new body' "
                "ELSE body END, kind, updated_at, internal FROM dump"
            )
        took["TRUNCATE and a reload, in one transaction"] = world.wait_caught_up("a truncate and reload")
        assert world.stored()["50:0"][0] == "Note 50 v0\n\nreloaded with a new body"
        wait_for(lambda: all(r.status.ended for r in world.runs()), timeout=30, what="the reload's run to end")

        # An UPDATE of columns nothing indexed reads writes nothing to the outbox (counted inside the writer's
        # own transaction, where no relay can have taken a row yet) and so runs no task; the same statement
        # on an indexed column, as a control, writes one row per changed record.
        tasks = world.received(INDEX_RECORD) + world.received(INDEX_BATCH)
        with sql.transaction():
            sql.run(f"UPDATE \"{t}\" SET internal = 'seen by nobody', updated_at = now()")
            assert outbox_rows(sql, c) == 0
        with sql.transaction():
            sql.run(f'UPDATE "{t}" SET internal = NULL, title = title')  # title rewritten, not changed
            assert outbox_rows(sql, c) == 0
        with sql.transaction():
            sql.run(f"UPDATE \"{t}\" SET title = 'Control' WHERE id = 1")
            assert outbox_rows(sql, c) == 1
        world.wait_caught_up("the control update")
        wait_for(
            lambda: world.received(INDEX_RECORD) + world.received(INDEX_BATCH) > tasks,
            timeout=10,
            what="the worker to log the control's task",
        )
        assert world.received(INDEX_RECORD) + world.received(INDEX_BATCH) == tasks + 1  # the control's alone

        sql.run(f'DELETE FROM "{t}" WHERE id IN (30, 31, 32, 33, 34)')
        took["a DELETE of 5 rows"] = world.wait_caught_up("5 deletes")
        assert not any(k.split(":")[0] in {"30", "31", "32", "33", "34"} for k in world.stored())

        # A primary-key change: the old id's chunks go, the new id's come.
        sql.run(f'UPDATE "{t}" SET id = id + 1000 WHERE id IN (20, 21)')
        took["a primary-key change of 2 rows"] = world.wait_caught_up("a primary-key change")
        assert {k.split(":")[0] for k in world.stored()} >= {"1020", "1021"}
        assert not {k.split(":")[0] for k in world.stored()} & {"20", "21"}

        sql.run(f'TRUNCATE "{t}"')
        took["TRUNCATE"] = world.wait_caught_up("a TRUNCATE to empty the collection")
        assert world.stored() == {}
        wait_for(lambda: all(r.status.ended for r in world.runs()), timeout=30, what="the truncates' runs to end")
        assert len(world.runs()) >= 2 and all(r.status == "done" for r in world.runs()), world.runs()

        text = world.metrics()
        assert f'vectorsync_capture_pending{{collection="{c}"}} 0.0' in text
        assert f'vectorsync_capture_lag_seconds{{collection="{c}"}} 0.0' in text
    for what, seconds in took.items():
        print(f"capture: {what}: searchable after {seconds:.2f} s")


def _run_together(config: Path, *commands: tuple[str, ...]) -> list[subprocess.CompletedProcess[str]]:
    """``run_cli`` of each command, all at once (each is a read, and each starts a Python of its own)."""
    with ThreadPoolExecutor(len(commands)) as pool:
        return list(pool.map(lambda args: run_cli(config, *args), commands))


def _number(pattern: str, text: str) -> float:
    found = re.search(pattern, text)
    assert found, f"{pattern!r} not in {text!r}"
    return float(found.group(1))


def test_status_doctor_and_metrics_show_what_waits_and_disable_leaves_nothing_behind(make_world: MakeWorld) -> None:
    world = make_world(capture="relay = false")  # the workers relay nothing: the rows stay pending
    c, t, sql = world.collection, world.source, world.sql
    init_capture(world)
    with celery_worker(world.config):
        written = time.monotonic()
        insert_notes(sql, t, [note(i) for i in range(1, 6)])
        sql.run(f"UPDATE \"{t}\" SET kind = 'pilot' WHERE id IN (1, 2)")
        assert world.pending() == 7  # 5 inserts and 2 updates: coalesced by the relay, not by the trigger

        listed, shown, doctor = _run_together(world.config, ("capture", "status"), ("status",), ("doctor", "--json"))
        assert listed.returncode == 0, listed.stdout + listed.stderr
        [row] = [line for line in listed.stdout.splitlines() if line.split()[:1] == [c]]
        assert row.split()[1:3] == ["installed", "7"], listed.stdout
        lag = _number(r"([0-9.]+)s", row.split(maxsplit=3)[3])
        assert 0 < lag <= time.monotonic() - written + 1, row
        assert shown.returncode == 0, shown.stdout + shown.stderr
        shown_lag = _number(rf"{c}\s+installed\s+7\s+([0-9.]+)s", shown.stdout)
        assert 0 < shown_lag <= time.monotonic() - written + 1, shown.stdout
        [check] = [k for k in json.loads(doctor.stdout)["checks"] if k["part"] == f"capture {c}"]
        assert check["status"] == "ok" and check["detail"].startswith("installed, 7 pending, oldest "), check
        assert 0 < _number(r"oldest ([0-9.]+) s", check["detail"]) <= time.monotonic() - written + 1, check

        text = world.metrics()
        assert f'vectorsync_capture_pending{{collection="{c}"}} 7.0' in text, text
        assert _number(rf'vectorsync_capture_lag_seconds{{collection="{c}"}} ([0-9.e+-]+)', text) >= lag

        # Disabled: no trigger and no function left; what is pending stays for the relay, new writes add none.
        disabled = run_cli(world.config, "capture", "disable", c)
        assert disabled.returncode == 0, disabled.stdout + disabled.stderr
        assert capture_catalog(sql, t, c) == ([], [])
        sql.run(f"UPDATE \"{t}\" SET body = 'after the triggers went' WHERE id = 3")
        insert_notes(sql, t, [note(6)])
        assert world.pending() == 7
        after, doctor = _run_together(world.config, ("capture", "status"), ("doctor", "--json"))
        assert re.search(rf"{c}\s+not installed\s+7\s", after.stdout), after.stdout
        assert f"run `vectorsync capture enable {c}`" in " ".join(after.stdout.split())  # the table wraps it
        [check] = [k for k in json.loads(doctor.stdout)["checks"] if k["part"] == f"capture {c}"]
        assert check["status"] == "fail" and f"vectorsync capture enable {c}" in check["fix"], check

        # `vectorsync relay`, on its own, drains the rows the triggers wrote before they went.
        relay = subprocess.Popen(
            [sys.executable, "-m", "producer.cli", "relay"],
            cwd=ROOT,
            env=process_env(world.config),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            wait_for(lambda: world.pending() == 0, timeout=60, what="vectorsync relay to drain the outbox")
            rows = world.crm.rows()
            drained = {k: v for k, v in world.expected().items() if k.split(":")[0] in {"1", "2", "3", "4", "5"}}
            wait_for(lambda: world.stored() == drained, timeout=60, what="the drained changes to be indexed")
            assert rows["3"]["body"] == "after the triggers went"  # the source has it; no trigger recorded it
            wait_for(
                lambda: f'vectorsync_capture_pending{{collection="{c}"}} 0.0' in world.metrics(),
                timeout=10,
                what="the metrics to show the drained outbox",
            )
        finally:
            relay.send_signal(signal.SIGINT)
            output, _ = relay.communicate(timeout=30)
        assert relay.returncode == 0, output
        assert f"relaying changes of {c}" in output, output


def _role_url(url: str, role: str) -> str:
    parts = urllib.parse.urlsplit(url)
    netloc = f"{role}@{parts.netloc.rsplit('@', 1)[1]}" if "@" in parts.netloc else f"{role}@{parts.netloc}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _run_as_dba(url: str, script: str) -> subprocess.CompletedProcess[str]:
    """The script as a DBA runs it: psql where the machine has it, else the same text as one simple query."""
    psql = shutil.which("psql")
    if psql is not None:
        return subprocess.run(
            [psql, url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", "-"],
            input=script,
            capture_output=True,
            text=True,
            timeout=60,
        )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(script.encode())  # type: ignore[call-overload]  # no parameters: several statements at once
    return subprocess.CompletedProcess([], 0, "", "")


def test_a_dba_runs_what_capture_sql_prints_where_vectorsync_may_not(make_world: MakeWorld, postgres_url: str) -> None:
    role = unique_name("reader")
    dba = Psql(postgres_url)
    dba.run(f"CREATE ROLE {role} LOGIN")
    try:
        world = make_world(source_url=_role_url(postgres_url, role))
        c, t = world.collection, world.source
        dba.run(f'GRANT SELECT ON "{t}" TO {role}')  # vectorsync's role reads the table, and may not alter it

        refused = run_cli(world.config, "capture", "enable", c)
        assert refused.returncode != 0
        message = refused.stdout + refused.stderr
        assert f"vectorsync capture sql {c}" in message and t in message, message

        printed = run_cli(world.config, "capture", "sql", c)
        assert printed.returncode == 0, printed.stdout + printed.stderr
        script = printed.stdout
        assert script.startswith("BEGIN;") and script.rstrip().endswith("COMMIT;"), script
        ran = _run_as_dba(postgres_url, script)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert capture_catalog(dba, t, c) == (
            sorted(f"vs_{c}_{e}" for e in ("ins", "upd", "del", "trn")),
            [f"vs_capture_{c}"],
        )

        listed = run_cli(world.config, "capture", "status")
        assert re.search(rf"{c}\s+installed\s+0\s", listed.stdout), listed.stdout + listed.stderr
        # A deploy's `vectorsync init`, and `capture enable`, find it in place as they would install it.
        again = _run_together(world.config, ("init",), ("capture", "enable", c))
        assert [r.returncode for r in again] == [0, 0], [r.stdout + r.stderr for r in again]
        assert f"capture  {c} on " in again[0].stdout, again[0].stdout
        with celery_worker(world.config):
            insert_notes(world.sql, t, [note(i) for i in range(1, 11)])
            world.sql.run(f'UPDATE "{t}" SET body = %s WHERE id = 4', (note(4, version=1)["body"],))
            world.sql.run(f'DELETE FROM "{t}" WHERE id = 7')
            world.wait_caught_up("the changes of a capture the DBA installed")
    finally:
        dba.run(f"DROP OWNED BY {role}")
        dba.run(f"DROP ROLE {role}")
        dba.close()
