"""Retry or give up (worker.tasks.retries): one path for every task, by the task's policy."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from celery.exceptions import Retry

from store.errors import StoreUnavailable
from worker.tasks.retries import DeliveredTooOften, again, check_redeliveries, message_run_id, retry_or_give_up


class _Task:
    """What retry_or_give_up reads of a Celery task: its name, its request, and retry()."""

    name = "vectorsync.index_batch"

    def __init__(self, retries: int, *, task_id: str | None = None, redelivered: bool = False) -> None:
        self.request = SimpleNamespace(retries=retries, id=task_id, delivery_info={"redelivered": redelivered})
        self.retried: list[dict[str, Any]] = []

    def retry(self, **options: Any) -> Retry:
        self.retried.append(options)
        return Retry("retried")


class _Counter:
    """Redeliveries in a dict (``store.broker.redeliveries`` keeps them in Redis)."""

    def __init__(self) -> None:
        self.counted: dict[tuple[str, int], int] = {}

    def count(self, message_id: str, attempt: int) -> int:
        self.counted[message_id, attempt] = self.counted.get((message_id, attempt), 0) + 1
        return self.counted[message_id, attempt]


COUNTER = _Counter()


@pytest.fixture(autouse=True)
def _policy(monkeypatch: pytest.MonkeyPatch) -> None:
    worker = SimpleNamespace(max_retries=2, retry_delay=1.0, max_redeliveries=2, time_limit=12)
    context = SimpleNamespace(settings=SimpleNamespace(worker=worker), redeliveries=lambda: COUNTER)
    monkeypatch.setattr("worker.tasks.retries.context", lambda: context)


def test_a_task_is_retried_with_backoff_while_its_policy_allows_then_gives_up() -> None:
    first, last = _Task(retries=1), _Task(retries=2)
    with pytest.raises(Retry):
        retry_or_give_up(first, StoreUnavailable("down"), args=("notes",), kwargs={"run_id": "r"})
    assert first.retried[0]["countdown"] == 2.0 and first.retried[0]["kwargs"] == {"run_id": "r"}
    retry_or_give_up(last, StoreUnavailable("down"))  # returns: the caller gives up
    assert last.retried == []


def test_a_pushed_document_is_retried_for_as_long_as_the_outage_lasts() -> None:
    pushed = _Task(retries=50)
    pushed.name = "vectorsync.index_document"
    with pytest.raises(Retry):
        retry_or_give_up(pushed, StoreUnavailable("down"))


def test_a_run_task_sent_without_a_run_id_takes_its_message_id_in_every_attempt() -> None:
    message = str(uuid.uuid4())
    assert (
        message_run_id(_Task(0, task_id=message)) == message_run_id(_Task(3, task_id=message)) == uuid.UUID(message).hex
    )
    assert message_run_id(_Task(0, task_id=None)) is None


def test_again_tells_a_retry_or_a_redelivery_from_a_first_attempt() -> None:
    assert not again(_Task(0)) and again(_Task(1)) and again(_Task(0, redelivered=True))


def test_a_message_that_keeps_coming_back_is_given_up_after_max_redeliveries() -> None:
    message = str(uuid.uuid4())
    check_redeliveries(_Task(0, task_id=message))  # a first delivery is not counted
    check_redeliveries(_Task(0, task_id=message, redelivered=True))
    check_redeliveries(_Task(0, task_id=message, redelivered=True))
    with pytest.raises(DeliveredTooOften, match=r"came back 3 times .* worker.max_redeliveries \(2\)"):
        check_redeliveries(_Task(0, task_id=message, redelivered=True))
    check_redeliveries(_Task(1, task_id=message, redelivered=True))  # its retry counts afresh
    assert COUNTER.counted[message, 0] == 3
