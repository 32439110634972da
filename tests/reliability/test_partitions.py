"""Network partitions under a reindex: the worker in a network namespace of the test's own, its packets to
PostgreSQL, the broker or the embedding provider dropped (silence, not a refusal) for 30 s, then healed.

Each scenario has its own namespace, PostgreSQL, Redis and model servers, listening on the host side of
the namespace's veth pair, so the three run side by side (pytest-xdist) and only the worker's traffic is
cut: the test process checks the store over the host's own address, which no rule touches.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from store.connect.postgres import engine_url
from tests.crm import note
from tests.reliability.conftest import Rig, make_rig
from tests.reliability.network import NETWORK, Namespace, namespace
from tests.services import embedded_postgres
from tests.workers import ROOT, process_env, wait_for

#: Records of each reindex, and the part of them indexed when the cut lands: all batches sent, the rest still
#: to do, few enough that the time from the heal to the run's end is mostly the recovery itself.
RECORDS, CUT_AT = 3000, 0.6
#: How long each cut holds, seconds.
HOLD = 30


@dataclass
class Partitioned:
    rig: Rig
    net: Namespace

    def ports(self, target: str) -> list[int]:
        """The host ports that carry the worker's traffic to ``target``."""
        if target == "postgres":
            return [int(re.search(r":(\d+)/", self.rig.database).group(1))]  # type: ignore[union-attr]
        if target == "broker":
            return [self.rig.broker.port]
        return [self.rig.primary.port, self.rig.backup.port]


#: Seconds a task may run (worker.time_limit). More than the rest of the rig's 12 s: a pool process's first task
#: (its imports and connections) took 12 s on a loaded machine (three scenarios and more on 2 cores). A silent
#: peer is noticed well before it all the same.
TIME_LIMIT = 30


@pytest.fixture
def partitioned(tmp_path: Path) -> Iterator[Partitioned]:
    """A rig whose servers listen on the host side of a namespace of this test's own."""
    # The server's data outside pytest's folders, which another pytest run may close to other users (0700)
    # while this one runs; the server runs as a user of its own.
    with (
        namespace() as net,
        tempfile.TemporaryDirectory(prefix="vspg") as data,
        embedded_postgres(Path(data) / "pg", host=net.host, clients=net.subnet) as database,
        make_rig(
            tmp_path / "rig",
            database,
            host=net.host,
            time_limit=TIME_LIMIT,
            broker_keys="socket_timeout = 3",
            sections=NETWORK,
        ) as rig,
    ):
        yield Partitioned(rig, net)


#: What each scenario cuts, as the figures table names it.
CUT = {"postgres": "PostgreSQL", "broker": "the broker (Redis)", "provider": "the embedding provider"}

#: Takes the write lock of one record the way a worker's swap does, says so, and sits in the transaction.
LOCK_HOLDER = """
import sys, time
from store.settings import load_settings
from store.state.ledger import ledger_from_settings
ledger = ledger_from_settings(load_settings(sys.argv[1]))
with ledger.locked(sys.argv[2], ["held"]):
    print("locked", flush=True)
    time.sleep(600)
"""


@contextmanager
def lock_held_in_the_namespace(rig: Rig, net: Namespace) -> Iterator[Callable[[], bool]]:
    """A process in the namespace holding a record's lock in an open transaction; yields a check, from the
    host, of whether the server has let go of the lock (it ended the session of the silent client)."""
    holder = subprocess.Popen(
        [*net.prefix, sys.executable, "-c", LOCK_HOLDER, str(rig.config), rig.table],
        cwd=ROOT,
        env=process_env(rig.config),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    engine = sa.create_engine(engine_url(rig.database))

    def free() -> bool:
        with engine.begin() as conn:  # the key a swap locks (store.state.ledger.postgres)
            return bool(
                conn.execute(
                    sa.text("SELECT pg_try_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": f"{rig.table}/held"}
                ).scalar_one()
            )

    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line.strip() == "locked", line + holder.stdout.read()
        assert not free()
        yield free
    finally:
        holder.kill()
        holder.wait(timeout=10)
        engine.dispose()


@pytest.mark.parametrize("target", list(CUT))
def test_a_partition_of_30_s_mid_reindex_heals(partitioned: Partitioned, target: str) -> None:
    """Cut, hold 30 s, heal: every record indexed once, every run ended, no task killed by its time limit.
    With PostgreSQL cut, a session that sits in a transaction holding a record's lock (as a worker's swap
    does) loses it within seconds: the server noticed its client's silence."""
    rig, net = partitioned.rig, partitioned.net
    rig.crm.insert([note(i) for i in range(1, RECORDS + 1)])
    producer = rig.producer()
    with rig.worker("netns", concurrency=2, prefix=net.prefix), ExitStack() as stack:
        lock_free = stack.enter_context(lock_held_in_the_namespace(rig, net)) if target == "postgres" else None
        run_id = producer.reindex_all(rig.collection)
        wait_for(
            lambda: producer.reindex_status(run_id).processed >= CUT_AT * RECORDS,
            timeout=120,
            every=0.1,
            what=f"{CUT_AT:.0%} of the run",
        )
        net.cut(partitioned.ports(target))
        cut, cut_clock = time.monotonic(), datetime.now()
        try:
            if lock_free is not None:
                wait_for(lock_free, timeout=HOLD - 5, every=0.2, what="the server to end the silent session")
                released = time.monotonic() - cut
            time.sleep(max(0.0, cut + HOLD - time.monotonic()))
        finally:
            net.heal()
        healed = time.monotonic()
        at_heal = producer.reindex_status(run_id).processed
        wait_for(
            lambda: producer.reindex_status(run_id).processed > at_heal or producer.reindex_status(run_id).status.ended,
            timeout=120,
            what="progress after the heal",
        )
        resumed = time.monotonic() - healed
        wait_for(lambda: producer.reindex_status(run_id).status.ended, timeout=180, what="the run to end")
        recovery = time.monotonic() - healed
        rig.verify(
            f"packets to {CUT[target]} dropped {HOLD} s mid-reindex", faults=1, resumed=resumed, recovery=recovery
        )
        lock = f"; a silent session's lock freed {released:.1f}s into the cut" if lock_free is not None else ""
        print(
            f"\n{target}: {at_heal} of {RECORDS} done at the heal; the next batch {resumed:.1f}s after it, "
            f"the run done {recovery:.1f}s after it{lock}"
        )
    log = (rig.config.parent / "netns.log").read_text()
    assert overran(log, TIME_LIMIT) == []
    seen = noticed(log, cut_clock)  # not hanging until the heal: the settings under test at work
    assert seen is not None and seen < NOTICED_WITHIN, f"the worker noticed the cut {seen}s into it"
    print(f"{target}: the worker noticed the cut {seen:.1f}s into it")
    assert producer.reindex_status(run_id).status == "done"
    producer.close()


#: Seconds into a cut by which the worker's log must say it noticed: its settings say 2 to 4 s.
NOTICED_WITHIN = 10
_LOGGED = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): (?:WARNING|ERROR|CRITICAL)/")


def noticed(log: str, since: datetime) -> float | None:
    """Seconds from ``since`` to the first warning or error the worker logged after it (None: none)."""
    for line in log.splitlines():
        if logged := _LOGGED.match(line):
            at = datetime.strptime(logged.group(1), "%Y-%m-%d %H:%M:%S,%f")
            if at >= since:
                return (at - since).total_seconds()
    return None


_STARTED = re.compile(r"Task \S+\[([\w-]+)\] received")
_ENDED = re.compile(r"Task \S+\[([\w-]+)\] (?:succeeded in ([\d.]+)s|retry:|raised)")
_LIMIT = re.compile(r"(?:Soft|Hard) time limit \(\S+\) exceeded for \S+\[([\w-]+)\]")


def overran(log: str, limit: float) -> list[str]:
    """The lines of a worker's log that show a task attempt running into its time limit, or past it.

    A time limit said of an attempt that had ended is not one: a worker whose main process was blocked (its
    events' heartbeat waits for the broker to come back) hears of its pool's results late, and its timers
    fire for attempts that ended meanwhile.
    """
    running: set[str] = set()
    found = []
    for line in log.splitlines():
        if started := _STARTED.search(line):
            running.add(started.group(1))
        elif ended := _ENDED.search(line):
            running.discard(ended.group(1))
            if ended.group(2) and float(ended.group(2)) >= limit:
                found.append(line)
        elif (limited := _LIMIT.search(line)) and limited.group(1) in running:
            found.append(line)
    return found
