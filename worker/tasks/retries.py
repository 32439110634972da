"""Retry or give up: every task's options (``RETRIED``: a backend out of reach retried with backoff), the one path by
which every task acts on its ``worker.tasks.policy.RetryPolicy``, how a task knows an attempt of itself from the
first, and when it gives up on a message that keeps coming back."""

from __future__ import annotations

import uuid
from typing import Any

from celery import Task

from store.contract import INDEX_DOCUMENT
from store.errors import StoreUnavailable, VectorsyncError
from worker.runtime.context import context
from worker.runtime.delivery import RedeliveredTask
from worker.tasks.policy import RetryPolicy

__all__ = [
    "RETRIED",
    "DeliveredTooOften",
    "again",
    "check_redeliveries",
    "message_run_id",
    "retry_or_give_up",
    "task_policy",
]

#: Every task: a backend that cannot be reached where no finer rule applies (building this process's context,
#: opening a run) retries the task with backoff, never loses it.
RETRIED: dict[str, Any] = {
    "max_retries": None,
    "autoretry_for": (StoreUnavailable,),
    "retry_backoff": True,
    "retry_backoff_max": 60,
    "base": RedeliveredTask,
}


class DeliveredTooOften(VectorsyncError):
    """A task's message came back more than ``worker.max_redeliveries`` times: the task gives up on it, as on
    an error retrying cannot fix (a batch's records go to failures and its run goes on; a fan-out, a sweep or
    an index build ends its run failed)."""


def task_policy(task: Task) -> RetryPolicy:
    """``worker.max_retries``; none for a pushed document, whose content lives only in its message."""
    policy = RetryPolicy.from_settings(context().settings.worker)
    return policy.without_limit() if task.name == INDEX_DOCUMENT else policy


def retry_or_give_up(
    task: Task, exc: BaseException, *, args: tuple[Any, ...] | None = None, kwargs: dict[str, Any] | None = None
) -> None:
    """Retry ``task`` with backoff (raises Retry) while its policy allows; return once it gives up. ``args``
    and ``kwargs``: the retry's, when not the task's own."""
    policy, retries = task_policy(task), task.request.retries
    if policy.may_retry(retries):
        raise task.retry(
            args=args, kwargs=kwargs, exc=exc, countdown=policy.countdown(retries), max_retries=policy.max_retries
        ) from exc


def again(task: Task) -> bool:
    """Whether this is a second attempt of the task (retried or redelivered): a run then fans out every id page,
    numbered as in a first load, since batches of the first attempt may be counted already, by number."""
    return bool(task.request.retries or (task.request.delivery_info or {}).get("redelivered"))


def message_run_id(task: Task) -> str | None:
    """The run id of a run task sent without one (beat's sweeps, app code): its message's, the same in every
    attempt, so that a retry or a redelivery goes on with the run the first attempt began."""
    try:
        return uuid.UUID(str(task.request.id)).hex
    except ValueError:
        return None


def check_redeliveries(task: Task) -> None:
    """Count this delivery if it is a redelivery (``store.broker.redeliveries``); raise DeliveredTooOften past
    ``worker.max_redeliveries``. A first delivery, or a retry's, costs nothing."""
    if not (task.request.delivery_info or {}).get("redelivered"):
        return
    ctx = context()
    times = ctx.redeliveries().count(str(task.request.id), task.request.retries)
    worker = ctx.settings.worker
    if times > worker.max_redeliveries:
        raise DeliveredTooOften(
            f"its task came back {times} times after its worker process died under it or was killed at "
            f"worker.time_limit ({worker.time_limit}s), more than worker.max_redeliveries "
            f"({worker.max_redeliveries}): given up. The worker log says why (out of memory, a crash, the time "
            "limit); fix that or raise worker.time_limit, then send it again"
        )
