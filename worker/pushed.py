"""Pushed documents: a push's work (index its content, or delete it), dropping its kept copy once it is done, and
sending again the pushes a sweep finds lost (``store.broker.pushes``)."""

from __future__ import annotations

import dataclasses
import logging
import time

from store.broker.queues import sent_headers
from store.connect.redis import unavailable
from store.contract import INDEX_DOCUMENT, LIVE_QUEUE
from worker.batches import BatchResult, Document
from worker.celery import app
from worker.delivery import send
from worker.flow import Batch, Work
from worker.process import context

__all__ = ["Pushed", "is_pushed", "send_lost"]

log = logging.getLogger(__name__)


class Pushed(Work):
    """A pushed document's work: index its content, or delete it (``deleted``)."""

    def __init__(self, collection: str, document: Document, *, deleted: bool) -> None:
        super().__init__(Batch(collection, [document.id]))
        self.document, self.deleted = document, deleted

    def __call__(self) -> dict[str, BatchResult]:
        collection, document = self.batch.collection, self.document
        if self.deleted:
            return context().written(
                collection, [document.id], lambda i: i.delete_documents([document.id], version=document.version)
            )
        return context().written(collection, [document.id], lambda i: i.index_documents([document]))

    def settle(self) -> None:
        """The push is indexed, deleted, superseded or given up: its kept copy goes, unless a newer one is kept."""
        context().pushes().settle(self.batch.collection, self.document.id, self.document.version)


def is_pushed(collection: str) -> bool:
    """Whether ``collection`` is declared with pushed documents (no source to read)."""
    declared = context().settings.collections.get(collection)
    return declared is not None and declared.source.kind == "push"


def send_lost(collection: str) -> int:
    """Send again each push of ``collection`` kept for longer than ``broker.visibility_timeout`` (lost: a
    message a dead worker held is back by then), marked sent now; how many. Raises StoreUnavailable."""
    ctx = context()
    pushes, sent = ctx.pushes(), 0
    with unavailable(f"the kept pushes of {collection} could not be read", "the next sweep sends them"):
        lost = list(pushes.lost(collection, older_than=ctx.settings.broker.visibility_timeout))
    for push in lost:
        with unavailable(f"the kept push of {collection}/{push.id} could not be renewed", "the next sweep sends it"):
            pushes.keep(collection, dataclasses.replace(push, sent_at=time.time()))
        args = (collection, push.id, push.text, push.metadata, push.version)
        send(app.tasks[INDEX_DOCUMENT], args=args, queue=LIVE_QUEUE, headers=sent_headers())
        sent += 1
    if sent:
        log.warning("sent again %d pushes of %s that no worker had indexed after they were sent", sent, collection)
    return sent
