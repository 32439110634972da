"""A task's calls to a broker that does not answer give up with the error the task already handles, against a
real Redis: a port nothing listens on (a refusal) and a server paused with ``CLIENT PAUSE WRITE`` (it takes
the connection and stays silent, as a partitioned one does), so the publish waits on its own timeouts
(``store.broker.config.PUBLISH_RETRY_POLICY``, ``broker.socket_timeout``) and gives up.

- ``worker.runtime.delivery.send`` raises BrokerUnavailable (a StoreUnavailable), which every task retries
  (tests/reliability/test_partitions.py shows a run ending done across a 30 s cut);
- a retry the broker cannot take sends the task's own message back (``Reject(requeue=True)``), where Celery's
  own ``Task.retry`` rejects it for good.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from celery import Celery, Task
from celery.exceptions import Reject

from store.broker.config import celery_config
from store.contract import BULK_QUEUE
from store.errors import StoreUnavailable
from store.settings import Settings
from tests.services import free_port, redis_server
from worker.runtime.delivery import RedeliveredTask, send

#: Timeouts small enough that a silent broker costs the test seconds; what is asserted is the error alone.
BROKER = {"socket_timeout": 1}
NETWORK = {"connect_timeout": 2, "tcp_user_timeout": 2, "health_check_interval": 1}


def _app(url: str, *, task_cls: type[Task] = RedeliveredTask) -> Celery:
    app = Celery("vectorsync-sending-test", set_as_current=False, task_cls=task_cls)
    app.conf.update(celery_config(Settings(broker={"url": url, **BROKER}, network=NETWORK)))
    return app


@pytest.fixture
def paused() -> Iterator[tuple[Celery, redis.Redis]]:
    """An app on a Redis of this test's own, which has taken one task (its connection is up), and a client
    of that Redis to pause it with."""
    with redis_server() as (url, _process):
        app, admin = _app(url), redis.Redis.from_url(url)
        try:
            app.send_task("vectorsync.probe", queue=BULK_QUEUE)
            assert admin.llen(BULK_QUEUE) == 1
            yield app, admin
        finally:
            admin.execute_command("CLIENT", "UNPAUSE")
            admin.close()
            app.close()


def _probe(app: Celery) -> Any:
    @app.task(bind=True, name="vectorsync.probe", shared=False)
    def probe(self: Task) -> None:
        """Stands for a task of ours; only its sending is exercised."""

    return probe


def test_a_task_sent_to_a_port_nothing_listens_on_raises_store_unavailable() -> None:
    app = _app(f"redis://127.0.0.1:{free_port()}/0")
    try:
        with pytest.raises(StoreUnavailable, match="the broker did not take vectorsync.probe"):
            send(_probe(app), args=(), queue=BULK_QUEUE)
    finally:
        app.close()


def test_a_task_sent_to_a_silent_broker_raises_store_unavailable(paused: tuple[Celery, redis.Redis]) -> None:
    app, admin = paused
    admin.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")  # longer than any timeout here: it is silence
    with pytest.raises(StoreUnavailable, match="the broker did not take vectorsync.probe"):
        send(_probe(app), args=(), queue=BULK_QUEUE)


def _retry_in_a_worker(task: Any) -> Reject:
    """What ``task.retry()`` raises when called as a worker calls it (a request of a delivered message)."""
    task.push_request(
        id="attempt-1",
        args=[],
        kwargs={},
        retries=0,
        called_directly=False,
        delivery_info={"exchange": "", "routing_key": BULK_QUEUE},
    )
    try:
        with pytest.raises(Reject) as rejected:
            task.retry(countdown=1)
        return rejected.value
    finally:
        task.pop_request()


def test_a_retry_the_silent_broker_cannot_take_sends_the_message_back(paused: tuple[Celery, redis.Redis]) -> None:
    app, admin = paused
    admin.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")
    assert _retry_in_a_worker(_probe(app)).requeue is True


def test_celerys_own_retry_drops_the_message_when_the_broker_cannot_take_it() -> None:
    """The behaviour RedeliveredTask replaces: with acks_late, a rejected message is gone for good."""
    app = _app(f"redis://127.0.0.1:{free_port()}/0", task_cls=Task)
    try:
        assert _retry_in_a_worker(_probe(app)).requeue is False
    finally:
        app.close()
