"""The guarantees on the broker setups teams deploy beside plain Redis: a Sentinel's master failing over in the
middle of a reindex (``SENTINEL FAILOVER``, and the master killed) loses nothing and ends every run; documents
pushed throughout a failover are all indexed.

(The broker restarted on TLS and on a Unix socket is ``test_crashes.test_the_broker_restarted_mid_reindex``.)

What a ``SENTINEL FAILOVER`` lost before a publish and a push's copy waited for a replica (``WAIT``,
``store.connect.redis.replicated``), and the pushes scenario below found. The Sentinel promotes the replica at once
and names it about 1 s later, but turns the old master into a replica only some 8 s after that (it waits
``4 * SENTINEL_PUBLISH_PERIOD`` before reconfiguring an instance that still says it is a master). Until then the
old master accepts writes, and the clients of a ``sentinel://`` URL still write there: kombu's Sentinel channel
and redis-py's ``SentinelConnectionPool`` ask the Sentinel for the master only when they open a connection, and
their open connections see no error until the old master, made a replica, answers READONLY or unblocks them.
When it resyncs from the new master, everything written meanwhile is gone, though every write was acknowledged:
tasks published (a pushed document, a record enqueued, a retry), and the pushes' copies kept for the sweep, so no
sweep sends such a push again. The workers still take from the old master too, so what they take there before
its demotion is indexed; what still waits in its queues then (workers behind, as under load) was lost: 61 to 64
of some 145 pushes here. Measured with the Celery config and ``redis_client`` of then on a Sentinel group: 305
publishes and INCRs acknowledged over a failover, 98 on the new master; 189 fell between the switch (1.1 s) and
the old master's demotion (11.3 s), the rest between the promotion and the switch; ``WAIT 1`` on the old master
answered 0 from 0.8 s on, and its first error, READONLY, came at 11.4 s. With the master killed instead, its
connections break and the clients find the new master: nothing was lost.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from store.broker.producer import Producer
from tests.backends import unique_name
from tests.crm import note, stored_chunks
from tests.reliability.brokers import Sentinel
from tests.reliability.conftest import FIGURES, Rig, make_rig
from tests.workers import wait_for

#: Records of the reindex: 12 batches of 50, the provider slowed so that they are still out when the master goes.
RECORDS = 600


def _in_flight(rig: Rig, producer: Producer) -> str:
    """A reindex of RECORDS notes under way (a tenth of them done), the provider slowed to keep it going."""
    rig.crm.insert([note(i) for i in range(1, RECORDS + 1)])
    rig.primary.always(delay=0.5)
    run_id = producer.reindex_all(rig.collection)
    wait_for(lambda: producer.reindex_status(run_id).processed >= RECORDS // 10, timeout=60, what="the run to start")
    return run_id


@pytest.mark.parametrize("fault", ["SENTINEL FAILOVER", "kill -9 of the master"])
def test_a_sentinel_failover_mid_reindex_loses_nothing(tmp_path: Path, postgres_url: str, fault: str) -> None:
    """The workers, the producer and the cache on a ``sentinel://`` URL; the master fails over to the replica
    while batches are out (taken, recorded as unacknowledged, being embedded; others queued); the old master
    comes back as the replica. Every record is indexed once and the run ends, with no sweep to heal it."""
    with make_rig(tmp_path, postgres_url, form="sentinel") as rig:
        broker = rig.broker
        assert isinstance(broker, Sentinel)
        producer = rig.producer()
        with rig.worker(concurrency=2):
            run_id = _in_flight(rig, producer)
            at_switch = []
            started = time.monotonic()

            def switched() -> None:
                at_switch.append(producer.reindex_status(run_id))

            if fault == "SENTINEL FAILOVER":
                old, new = broker.failover(switched=switched)
            else:
                old, new = broker.kill_master(switched=switched)
            took = time.monotonic() - started
            assert new != old
            [status] = at_switch
            assert status.total is not None and not status.status.ended, (
                f"the run was not under way as the master changed: it tested nothing ({status})"
            )
            rig.primary.always()
            rig.verify(f"Sentinel: {fault} mid-reindex ({RECORDS} records)", faults=1, failover=round(took, 1))
            [run] = rig.runs()
            assert (run.status, run.processed, run.failed) == ("done", RECORDS, 0), run
        producer.close()


class _Pushes(threading.Thread):
    """An app pushing new documents all the while (``index_document``, 10 a second), as the master fails over: a
    push the broker refused is counted, and sent again once the failover is over, as an app told of the error
    would."""

    def __init__(self, rig: Rig, collection: str) -> None:
        super().__init__(name="pushes", daemon=True)
        self.rig, self.collection, self._stop_event = rig, collection, threading.Event()
        #: Pushed documents whose send the caller was told of: id -> text; those refused.
        self.sent: dict[str, str] = {}
        self.refused: list[str] = []

    def run(self) -> None:
        producer = self.rig.producer()
        try:
            while not self._stop_event.wait(0.1):
                doc = f"doc-{len(self.sent) + len(self.refused) + 1}"
                text = f"pushed document {doc}"
                try:
                    producer.index_document(self.collection, doc, text, {"kind": "push"})
                    self.sent[doc] = text
                except Exception:  # the broker refused it, and the caller knows
                    self.refused.append(doc)
        finally:
            producer.close()

    def stop(self) -> None:
        """Stop pushing; send the refused ones again."""
        self._stop_event.set()
        self.join(timeout=60)
        producer = self.rig.producer()
        try:
            for doc in self.refused:
                text = f"pushed document {doc}"
                producer.index_document(self.collection, doc, text, {"kind": "push"})
                self.sent[doc] = text
        finally:
            producer.close()

    def missing(self) -> list[str]:
        """The documents a caller was told were sent that the store does not hold as sent."""
        stored = stored_chunks(self.rig.database, self.rig.settings.vectors.table_prefix + self.collection)
        return sorted(doc for doc, text in self.sent.items() if stored.get(f"{doc}:0", ("",))[0] != text)


@pytest.mark.parametrize("fault", ["SENTINEL FAILOVER", "kill -9 of the master"])
def test_pushes_sent_across_a_sentinel_failover_are_all_indexed(tmp_path: Path, postgres_url: str, fault: str) -> None:
    """An app pushes documents throughout a failover (``index_document``, through the broker and the cache on a
    ``sentinel://`` URL): every push the app was told was sent is indexed, with no sweep to send it again."""
    pushed = unique_name("push")
    sections = f'[collections.{pushed}.source]\nkind = "push"\n'
    with make_rig(tmp_path, postgres_url, form="sentinel", sections=sections) as rig:
        broker = rig.broker
        assert isinstance(broker, Sentinel)
        pushes = _Pushes(rig, pushed)
        with rig.worker(concurrency=2):
            pushes.start()
            wait_for(lambda: len(pushes.sent) >= 20, timeout=30, what="pushes to flow")
            rig.primary.always(delay=0.5)  # the workers fall behind: pushes wait in the queue, as under load
            old, new = broker.failover() if fault == "SENTINEL FAILOVER" else broker.kill_master()
            assert new != old
            time.sleep(2)  # pushes to the new master too
            rig.primary.always()
            pushes.stop()
            try:
                wait_for(lambda: not pushes.missing(), timeout=60, every=1.0, what="every push to be indexed")
            finally:
                missing = pushes.missing()
                FIGURES.append(
                    {"scenario": f"Sentinel: {fault} while documents are pushed", "records": len(pushes.sent),
                     "faults": 1, "lost": len(missing), "duplicated": 0, "running": 0}
                )  # fmt: skip
            assert missing == [], f"{len(missing)} of {len(pushes.sent)} pushes lost, e.g. {missing[:5]}"
