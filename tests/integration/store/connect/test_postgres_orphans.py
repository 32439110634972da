"""A backend whose client died stops what it runs: a worker killed with kill -9 mid-statement left its backend
running on (an index build, a wait on a lock), holding its locks, while the task's next delivery waited on
them; in a loaded run of the fault suite each delivery ran into its hard time limit, for ever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import sqlalchemy as sa

from store.connect.postgres import make_engine

SLEEPER = """
import sys, time
from store.connect.postgres import make_engine
import sqlalchemy as sa
engine = make_engine(sys.argv[1], setting="test")
with engine.connect() as conn:
    print(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one(), flush=True)
    conn.execute(sa.text("SELECT pg_sleep(60)"))
"""


def test_a_statement_of_a_client_killed_with_kill_9_ends_within_seconds(postgres_url: str) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", SLEEPER, postgres_url], stdout=subprocess.PIPE, text=True)
    assert sleeper.stdout is not None
    backend = int(sleeper.stdout.readline())
    time.sleep(0.5)  # the sleep has begun
    os.kill(sleeper.pid, signal.SIGKILL)
    sleeper.wait()
    killed = time.monotonic()
    engine = make_engine(postgres_url, setting="test")
    try:
        while _running(engine, backend):
            assert time.monotonic() - killed < 30, "the orphaned statement ran on (it sleeps 60 s)"
            time.sleep(0.2)
    finally:
        engine.dispose()


def _running(engine: sa.Engine, backend: int) -> bool:
    with engine.connect() as conn:  # a transaction of its own: pg_stat_activity is a snapshot per transaction
        query = sa.text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid")
        return bool(conn.execute(query, {"pid": backend}).scalar_one())
