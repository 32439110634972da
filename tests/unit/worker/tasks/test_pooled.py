"""A pooled run whose pool's Redis goes away under its batches: every run ends, every record is stored, and
each is counted once (``processed == total``), whatever moment the outage hits.

The worker's own tasks run in this process (``producer.testing``) over a memory store and ledger, with the
leftover pool on fakeredis. The pool's Redis is the broker's own, as with the default ``[cache] url``: while it
is down the broker cannot take a message either, and Celery meets that as it does in a worker: ``Task.retry``
rejects the current message without requeue (what it does when it cannot publish the retry), and a send
raises kombu's OperationalError. The broker is back when the next message is delivered.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import fakeredis
import pytest
from celery import Task
from celery.exceptions import Reject
from celery.signals import task_prerun
from kombu.exceptions import OperationalError

from producer import testing
from store.contract import POOL_BATCH, POOL_KEY_PREFIX
from store.state.ledger import RunStatus
from worker.pipeline.leftovers import LeftoverPool
from worker.runtime.app import app

RECORDS: dict[str, str] = {}
WORDS = ["renewal", "pricing", "pilot", "invoice", "churn", "rollout", "contract", "meeting"]


def load_records(ids: list[str] | None) -> Iterable[dict[str, Any]]:
    return [{"id": key, "text": text} for key, text in RECORDS.items() if ids is None or key in ids]


class Broker:
    """The broker's Redis, which holds the leftover pool too (unless not ``shared``: then the pool's Redis alone
    goes down, and the broker takes messages throughout): up, or down until the next delivery."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.server = fakeredis.FakeServer()
        self.pool = LeftoverPool(fakeredis.FakeRedis(server=self.server))
        self.outages = 0
        self.shared = True
        retry, send = Task.retry, app.send_task

        def refused_retry(task: Task, *args: Any, **kwargs: Any) -> Any:
            if self.shared and not self.server.connected:  # Celery's Task.retry when its publish fails
                raise Reject(OperationalError("Error 111 connecting to the broker"), requeue=False)
            return retry(task, *args, **kwargs)

        def refused_send(*args: Any, **kwargs: Any) -> Any:
            if self.shared and not self.server.connected:
                raise OperationalError("Error 111 connecting to the broker")
            return send(*args, **kwargs)

        monkeypatch.setattr(Task, "retry", refused_retry)
        monkeypatch.setattr(app, "send_task", refused_send)

    def down(self) -> None:
        self.server.connected = False
        self.outages += 1

    def up(self, **_: Any) -> None:
        self.server.connected = True

    def down_at(self, method: str, when: Callable[..., bool], *, after: bool = False) -> None:
        """Go down on the pool's ``method`` (before or ``after`` it runs) the first time ``when(*args)``."""
        original = getattr(self.pool, method)

        def call(*args: Any, **kwargs: Any) -> Any:
            hit = not self.outages and self.server.connected and when(*args)
            if hit and not after:
                self.down()
            found = original(*args, **kwargs)
            if hit and after:
                self.down()
            return found

        setattr(self.pool, method, call)

    def keys(self) -> list[bytes]:
        """The pool's keys left once the broker is back."""
        self.up()
        return fakeredis.FakeRedis(server=self.server).keys(f"{POOL_KEY_PREFIX}*")


@pytest.fixture(autouse=True)
def records() -> None:
    rng = random.Random(23)
    RECORDS.clear()
    RECORDS.update({f"{i:04d}": " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 60))) for i in range(240)})


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Iterator[Broker]:
    made = Broker(monkeypatch)
    task_prerun.connect(made.up)  # the broker is back by the next delivery
    yield made
    task_prerun.disconnect(made.up)


SETTINGS = {
    "worker": {"batch_size": 20, "max_retries": 3},
    "embeddings": {"batch_size": 8},
    "collections": {
        "notes": {
            "source": {"kind": "python", "loader": f"{__name__}:load_records"},
            "chunker": {"max_tokens": 12, "overlap": 2},
        }
    },
}


def reindexed(broker: Broker) -> tuple[Any, set[str], list[testing.SentTask]]:
    """A first load of every record through the pool, run until no task is left: the run, the record ids in
    the store, and the tasks that ran."""
    with testing.queue(SETTINGS) as tasks:
        tasks.context.leftovers = lambda: broker.pool  # type: ignore[method-assign]
        run_id = tasks.producer.reindex_all("notes")
        tasks.run_queue()
        probe = [1.0] * tasks.settings.vectors.dimensions
        found = tasks.store.get_collection("notes", create=True).search(probe, limit=10_000)
        return tasks.ledger.run(run_id), {m.metadata["record_id"] for m in found}, tasks.done


def check(broker: Broker, moment: str) -> None:
    run, stored, _ = reindexed(broker)
    assert broker.outages == 1, f"the outage never came ({moment})"
    assert run.status == RunStatus.DONE, (moment, run)
    assert (run.processed, run.done, run.failed) == (len(RECORDS), len(RECORDS), 0), (moment, run)
    assert stored == set(RECORDS), moment
    assert broker.keys() == [], moment


def test_a_pooled_run_without_an_outage_counts_each_record_once(broker: Broker) -> None:
    run, stored, done = reindexed(broker)
    assert (run.status, run.processed, run.done) == (RunStatus.DONE, len(RECORDS), len(RECORDS))
    assert stored == set(RECORDS) and broker.keys() == []
    assert any(t.kwargs.get("batch") == POOL_BATCH for t in done)  # the pool batch ran: records were pooled


def test_the_broker_down_after_a_batch_claimed_from_the_pool(broker: Broker) -> None:
    """The failing CI run: a batch claims, the broker restarts under it, its settle fails. It was retried, the
    broker refused the retry, Celery dropped the message, and the run stopped short with the claim left."""
    broker.down_at("claim", lambda run_id, owner: owner == "3", after=True)
    check(broker, "after batch 3's claim")


def test_the_broker_down_while_the_pool_batch_writes(broker: Broker) -> None:
    """The pool batch took the pool, wrote it, and could not settle: retried into a broker that is down, it
    was dropped, so the run never counted its last batch and its claim stayed in Redis."""
    broker.down_at("settle", lambda run_id, owner, *_: owner.startswith("pool"))
    check(broker, "at the pool batch's settle")


def test_the_broker_down_after_a_batch_left_records_in_the_pool(broker: Broker) -> None:
    """A batch deferred records and then failed: its next attempt counted its own ids, those another batch
    had claimed (and counted) meanwhile too."""
    broker.down_at("defer", lambda run_id, pending: bool(pending), after=True)
    check(broker, "after the first defer")


@pytest.mark.parametrize("shared", [True, False], ids=["broker", "pool-only"])
@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
@pytest.mark.parametrize("method", ["claim", "defer", "settle", "take_over", "others"])
def test_the_broker_down_at_the_first_call_of_each_pool_operation(
    broker: Broker, method: str, after: bool, shared: bool
) -> None:
    broker.shared = shared
    broker.down_at(method, lambda *_: True, after=after)
    check(broker, f"{'after' if after else 'before'} the first {method}")


def test_the_pools_redis_down_after_a_defer_while_the_broker_stays(broker: Broker) -> None:
    """The batch that deferred was retried; meanwhile the next batch claimed its records and counted them, and
    the retry counted them again (the run's processed went past its total)."""
    broker.shared = False
    broker.down_at("defer", lambda run_id, pending: bool(pending), after=True)
    check(broker, "after the first defer, the broker up")
