"""At least once, also while the broker restarts: a task whose retry, or whose follow-up task, the broker
cannot take is delivered again rather than dropped.

Celery's ``Task.retry`` publishes the retry as a new message and, when that publish fails, rejects the
current message without requeue: the task is gone, and a run waiting for its batch never ends. That happens
exactly when a broker restarts under a task, and more often when the Redis that failed the task (the leftover
pool, the embedding cache) is the broker's own. Here the message is rejected with requeue instead: it comes
back once the broker does (or after the visibility timeout, which AOF keeps), and its task runs again from its
start, as after a worker that died. Every task is idempotent, so that is safe.

A task sends its follow-up tasks with ``send``: the broker's errors become BrokerUnavailable, a StoreUnavailable,
which every task already retries, rather than a run failed as if by a bug.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from celery import Task
from celery.exceptions import Reject
from kombu.exceptions import OperationalError

from store.connect.redis import REDIS_ERRORS
from store.errors import BrokerUnavailable

__all__ = ["BROKER_ERRORS", "RedeliveredTask", "delivered_again_if_unsent", "send"]

log = logging.getLogger(__name__)

#: What a publish raises when the broker cannot be reached: kombu wraps the transport's connection errors in
#: OperationalError; a Redis or socket error may still come through unwrapped (a declare, a health check).
BROKER_ERRORS: tuple[type[BaseException], ...] = (OperationalError, *REDIS_ERRORS)
_UNSENT: tuple[type[BaseException], ...] = (BrokerUnavailable, *BROKER_ERRORS)


def send(task: Task, *, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None = None, **options: Any) -> None:
    """``task.apply_async`` from inside a task, within ``PUBLISH_RETRY_POLICY`` (``store.broker.config``).
    Raises BrokerUnavailable (a StoreUnavailable) when the broker cannot take it."""
    try:
        task.apply_async(args=args, kwargs=kwargs, **options)
    except BROKER_ERRORS as exc:
        raise BrokerUnavailable(f"the broker did not take {task.name}: {type(exc).__name__}: {exc}") from exc


class RedeliveredTask(Task):
    """Every vectorsync task: a retry the broker cannot take delivers the message again (module docstring)."""

    def retry(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().retry(*args, **kwargs)
        except Reject as exc:  # only raised when the retry could not be sent
            log.warning(
                "the broker could not take a retry of %s[%s] (%s): delivering it again instead",
                self.name,
                self.request.id,
                exc.reason,
            )
            raise Reject(exc.reason, requeue=True) from exc


@contextlib.contextmanager
def delivered_again_if_unsent(task: Task) -> Iterator[None]:
    """Around what a task sends once its work is counted (a run's pool batch, its index build): if the broker
    cannot take it, the task's own message is delivered again, and its next run, counted already, sends it."""
    try:
        yield
    except _UNSENT as exc:
        log.warning(
            "the broker could not take what %s[%s] sends (%s): delivering it again", task.name, task.request.id, exc
        )
        raise Reject(exc, requeue=True) from exc
