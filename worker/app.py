"""The Celery app: ``celery -A worker worker`` runs it, ``celery -A worker flower`` watches it.

Configuration is read lazily from the settings (broker, time limits), with the
delivery guarantees of ``store.messaging.celery_config``: JSON only,
acks_late, reject_on_worker_lost, prefetch 1, task events for Flower.
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.signals import worker_process_init

from store.messaging import celery_config
from store.settings import load_settings

__all__ = ["app"]


def _config() -> dict[str, Any]:
    return celery_config(load_settings())


app = Celery("vectorsync", include=["worker.tasks"])
app.add_defaults(_config)


@worker_process_init.connect
def _fresh_process(**_: Any) -> None:
    # A forked pool process must not reuse its parent's connections.
    from worker.context import reset_context

    reset_context()
