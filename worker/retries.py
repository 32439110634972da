"""Retry or give up: the one path by which every task acts on its ``worker.policy.RetryPolicy``, and how a task
knows an attempt of itself from the first."""

from __future__ import annotations

import uuid
from typing import Any

from celery import Task

from store.contract import INDEX_DOCUMENT
from worker.policy import RetryPolicy
from worker.process import context

__all__ = ["again", "message_run_id", "retry_or_give_up", "task_policy"]


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
